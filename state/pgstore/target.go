package pgstore

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// Target names the database a connection string (or, when it is empty,
// the PG* environment variables) reaches, as host:port/database: what
// agentctl init records to notice that the configuration now points at
// another database. It holds no user and no password. An invalid
// connection string yields "" (opening the store reports it).
func Target(connString string) string {
	cfg, err := pgconn.ParseConfig(connString)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s:%d/%s", cfg.Host, cfg.Port, cfg.Database)
}
