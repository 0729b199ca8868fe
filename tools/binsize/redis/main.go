package main

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/redisstore"
)

func main() {
	client := redis.NewClient(redisstore.ClientOptions("127.0.0.1:6379"))
	store, err := redisstore.New(client)
	if err != nil {
		panic(err)
	}
	l := slidelog.MustNew(store, slidelog.PerMinute(100))
	res, _ := l.Allow(context.Background(), "client")
	fmt.Println(res.Allowed)
}
