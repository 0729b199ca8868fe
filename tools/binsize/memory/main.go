package main

import (
	"context"
	"fmt"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
)

func main() {
	l := slidelog.MustNew(memstore.New(), slidelog.PerMinute(100))
	res, _ := l.Allow(context.Background(), "client")
	fmt.Println(res.Allowed)
}
