package service

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/config"
)

// A Redis that accepts connections but never answers must not hold a caller past
// redis.timeout: the pump writes the projection while holding its lock connection, whose
// lease is 10 s. go-redis ignores context deadlines unless told otherwise.
func TestRedisCallsAreBoundedByTheConfiguredTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // hold the connection open, answer nothing
		}
	}()
	cfg := config.Default()
	cfg.RedisURL = "redis://" + ln.Addr().String() + "/0?read_timeout=30s"
	cfg.RedisTimeout = 300 * time.Millisecond
	b, err := New(t.Context(), "test", cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rdb, err := b.Redis()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- rdb.Set(context.Background(), "k", "v", 0).Err() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a Redis that never answers accepted the write")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Redis call outlived the leader lease: redis.timeout does not bound it")
	}
}
