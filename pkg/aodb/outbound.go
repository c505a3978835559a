package aodb

import (
	"context"
	"fmt"
	"time"
)

// InsertOutbound writes one outbound message (an RQFD or RQRD request) into coutmsgs and
// returns its COUTMSGS_ID once committed. The delivery columns (date sent, acknowledgement,
// error) are left to their defaults: who writes them is open (R-REQ-4).
func (i *Inbox) InsertOutbound(ctx context.Context, routingID, text string, now time.Time) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, i.timeout)
	defer cancel()
	res, err := i.db.ExecContext(ctx, `INSERT INTO coutmsgs (COUTMSGS_CLOB_MSG, COUTMSGS_DATE_INSERTED, ROUTINGID)
		VALUES (?, ?, ?)`, text, now, routingID)
	if err != nil {
		return 0, fmt.Errorf("insert coutmsgs row: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("insert coutmsgs row: %w", err)
	}
	return id, nil
}

// FindOutbound looks for an outbound message with exactly this routing id and text, inserted
// at or after since (COUTMSGS_DATE_INSERTED, which InsertOutbound writes): the check after a
// crash or an unanswered insert, before writing the request again. The text carries the
// request's own SEQN and DTTM, so equality identifies it. The column's collation compares
// case-insensitively, so each candidate is compared again byte for byte. coutmsgs has no
// index but its key; since keeps the scan to the recent rows, and it runs only for a request
// whose earlier insert may have committed.
func (i *Inbox) FindOutbound(ctx context.Context, routingID, text string, since time.Time) (id int64, found bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, i.timeout)
	defer cancel()
	rows, err := i.db.QueryContext(ctx, `SELECT COUTMSGS_ID, COUTMSGS_CLOB_MSG FROM coutmsgs
		WHERE ROUTINGID = ? AND COUTMSGS_DATE_INSERTED >= ? AND COUTMSGS_CLOB_MSG = ? ORDER BY COUTMSGS_ID`,
		routingID, since.Truncate(time.Second), text)
	if err != nil {
		return 0, false, fmt.Errorf("look up coutmsgs row: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var got string
		if err := rows.Scan(&id, &got); err != nil {
			return 0, false, fmt.Errorf("look up coutmsgs row: %w", err)
		}
		if got == text {
			return id, true, nil
		}
	}
	if err := rows.Err(); err != nil {
		return 0, false, fmt.Errorf("look up coutmsgs row: %w", err)
	}
	return 0, false, nil
}
