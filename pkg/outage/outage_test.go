package outage_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/outage"
)

func TestTransport(t *testing.T) {
	refused := func() error {
		_, err := net.DialTimeout("tcp", "127.0.0.1:1", time.Second)
		return err
	}()
	if refused == nil {
		t.Fatal("something listens on 127.0.0.1:1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	for _, c := range []struct {
		name string
		err  error
		want outage.Verdict
		ok   bool
	}{
		{"connection refused", refused, outage.Down, true},
		{"refused, wrapped", fmt.Errorf("read inbox: %w", refused), outage.Down, true},
		{"eof", fmt.Errorf("read: %w", io.EOF), outage.Down, true},
		{"closed", net.ErrClosed, outage.Down, true},
		{"deadline", fmt.Errorf("project: %w", ctx.Err()), outage.Unsure, true},
		{"not transport", errors.New("check constraint violated"), outage.Attempt, false},
		{"nil", nil, outage.Attempt, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := outage.Transport(c.err)
			if got != c.want || ok != c.ok {
				t.Fatalf("Transport(%v) = %s, %v; want %s, %v", c.err, got, ok, c.want, c.ok)
			}
		})
	}
}
