package queue

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/klauspost/compress/zstd"

	"github.com/msgexchange/msgexchange/pkg/db"
)

// The raw text is compressed with zstd (klauspost/compress): a FLOP shrinks to about a third
// and a schedule to a tenth, at a cost well under the round trip that stores it. One encoder
// and decoder serve every call (both are safe for concurrent EncodeAll/DecodeAll).
var (
	encoder, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	decoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(256<<20))
)

func compress(raw string) []byte { return encoder.EncodeAll([]byte(raw), nil) }

func decompress(b []byte) (string, error) {
	out, err := decoder.DecodeAll(b, nil)
	if err != nil {
		return "", fmt.Errorf("decompress raw text: %w", err)
	}
	return string(out), nil
}

// KeepRaw stores the raw text the pump read for msgID, once: a retry keeps what the first
// attempt stored (the inbox row does not change).
func KeepRaw(ctx context.Context, q db.Executor, msgID int64, raw string, now time.Time) error {
	_, err := q.Exec(ctx, `INSERT INTO proc_raw (msg_id, raw_zstd, raw_bytes, stored_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (msg_id) DO NOTHING`, msgID, compress(raw), len(raw), now)
	if err != nil {
		return fmt.Errorf("keep raw text of %d: %w", msgID, err)
	}
	return nil
}

// StoredRaw returns the raw text kept for msgID; an error wrapping db.ErrNotFound when none was.
func StoredRaw(ctx context.Context, q db.Executor, msgID int64) (string, error) {
	var b []byte
	err := q.QueryRow(ctx, `SELECT raw_zstd FROM proc_raw WHERE msg_id = $1`, msgID).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("stored raw text of %d: %w", msgID, db.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("stored raw text of %d: %w", msgID, err)
	}
	return decompress(b)
}

// StoredRawPart returns limit characters at most of the text kept for msgID from the
// character offset (0-based), and the length of the whole text in characters, as
// aodb.RawPart reads the inbox row. It decompresses as a stream, so a reader of a 16 MiB
// text holds its part and the decoder's window, never the whole text. An error wrapping
// db.ErrNotFound when nothing was kept.
func StoredRawPart(ctx context.Context, q db.Executor, msgID, offset, limit int64) (string, int64, error) {
	var b []byte
	err := q.QueryRow(ctx, `SELECT raw_zstd FROM proc_raw WHERE msg_id = $1`, msgID).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, fmt.Errorf("stored raw text of %d: %w", msgID, db.ErrNotFound)
	}
	if err != nil {
		return "", 0, fmt.Errorf("stored raw text of %d: %w", msgID, err)
	}
	d, err := zstd.NewReader(bytes.NewReader(b), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(256<<20))
	if err != nil {
		return "", 0, fmt.Errorf("decompress raw text of %d: %w", msgID, err)
	}
	defer d.Close()
	r := bufio.NewReader(d)
	var (
		part  strings.Builder
		chars int64
	)
	for ; ; chars++ {
		c, _, err := r.ReadRune()
		if errors.Is(err, io.EOF) {
			return part.String(), chars, nil
		}
		if err != nil {
			return "", 0, fmt.Errorf("decompress raw text of %d: %w", msgID, err)
		}
		if chars >= offset && chars < offset+limit {
			part.WriteRune(c)
		}
	}
}
