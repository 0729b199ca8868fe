package contender_test

import (
	"context"
	"fmt"
	"time"

	"github.com/slidelog/slidelog/bench/contender"
)

func ExampleNewMemory() {
	l, err := contender.NewMemory(contender.SlidelogMemory, 2, time.Minute)
	if err != nil {
		panic(err)
	}
	for range 3 {
		ok, _ := l.Allow(context.Background(), "alice")
		fmt.Println(ok)
	}
	if err := l.Close(); err != nil {
		fmt.Println(err)
	}
	// Output:
	// true
	// true
	// false
}
