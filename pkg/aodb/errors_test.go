package aodb_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/outage"
	"github.com/msgexchange/msgexchange/testkit/mysqltest"
)

func TestClassify(t *testing.T) {
	dead, err := aodb.Open("svc:pw@tcp(127.0.0.1:1)/none?parseTime=true", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	_, refused := dead.Raw(context.Background(), 1)
	my := mysqltest.New(t)
	// The service account may not run DDL: a statement the server refuses.
	svc, err := sql.Open("mysql", my.ServiceDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	_, denied := svc.Exec("CREATE TABLE nope (id int)")
	if denied == nil {
		t.Fatal("the service account may run DDL")
	}
	server := func(n uint16) error { return fmt.Errorf("read inbox row 7: %w", &mysql.MySQLError{Number: n}) }
	for _, c := range []struct {
		name string
		err  error
		want outage.Verdict
	}{
		{"refused (real)", refused, outage.Down},
		{"command denied (real)", denied, outage.Attempt},
		{"read-only after failover", server(1290), outage.Down},
		{"shutdown", server(1053), outage.Down},
		{"connection killed", server(1927), outage.Down},
		{"account refused", server(1045), outage.Down},
		{"lock wait timeout", server(1205), outage.Unsure},
		{"statement timeout", server(1969), outage.Unsure},
		{"data too long", server(1406), outage.Attempt},
		{"invalid connection", fmt.Errorf("x: %w", mysql.ErrInvalidConn), outage.Down},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := aodb.Classify(c.err); got != c.want {
				t.Errorf("Classify(%v) = %s, want %s", c.err, got, c.want)
			}
		})
	}
}
