package service

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
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
	for name, set := range map[string]func(*config.Redis){
		"url": func(r *config.Redis) { r.URL = "redis://" + ln.Addr().String() + "/0?read_timeout=30s" },
		// A sentinel that never answers: the failover client asks it for the master first.
		"sentinel": func(r *config.Redis) {
			r.Sentinel = config.RedisSentinel{Master: "m", Addrs: []string{ln.Addr().String()}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := config.Default()
			cfg.PG.DSN = "postgres://nobody@127.0.0.1:1/none" // the pool connects lazily; never used here
			set(&cfg.Redis)
			cfg.Redis.Timeout = 300 * time.Millisecond
			rdb, err := baseRedis(t, cfg)
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
		})
	}
}

// A service without a connection string stops at start-up naming the variable: there is no
// default that would connect somewhere (as a superuser) by accident.
func TestMissingConnectionsNameTheVariable(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if _, err := New(t.Context(), "test", config.Default(), log); err == nil || !strings.Contains(err.Error(), "MSGX_PG_DSN") {
		t.Errorf("New without a PostgreSQL DSN: %v, want an error naming MSGX_PG_DSN", err)
	}
	cfg := config.Default()
	cfg.PG.DSN = "postgres://nobody@127.0.0.1:1/none"
	b, err := New(t.Context(), "test", cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Redis(); err == nil || !strings.Contains(err.Error(), "MSGX_REDIS_URL") {
		t.Errorf("Redis without a URL: %v, want an error naming MSGX_REDIS_URL", err)
	}
	if _, err := b.Inbox(); err == nil || !strings.Contains(err.Error(), "MSGX_MYSQL_DSN") {
		t.Errorf("Inbox without a DSN: %v, want an error naming MSGX_MYSQL_DSN", err)
	}
	b.Config.Redis.URL = "redis://:S3cretRD@127.0.0.1:notaport/0"
	if _, err := b.Redis(); err == nil || strings.Contains(err.Error(), "S3cretRD") {
		t.Errorf("Redis with a bad URL: %v, want an error without the password", err)
	}
}
