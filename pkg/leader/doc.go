// Package leader keeps a single active instance per role (R-LEADER-1): every replica of a role
// runs an Elector, the one that holds the role's PostgreSQL session advisory lock works, and the
// others wait as standbys and take over when the lock frees.
//
// # The lock connection
//
// The lock is held on a dedicated *pgx.Conn, never on a pool connection, because a pool may
// recycle a connection and with it the lock. A standby polls pg_try_advisory_lock on its own
// connection; the call that succeeds is the only lock call of the term, so the lock is never
// stacked and one unlock (or the connection's end) releases it.
//
// # Fencing
//
// Writes that must stop when leadership ends run on the lock connection itself, through
// Session.Do or Session.Tx. PostgreSQL releases a session lock only when the session ends or
// unlocks, so while a standby can hold the lock the old holder's connection is gone and its
// writes cannot commit. That holds whatever the old holder's process believes.
//
// Everything else the work does (Kafka, Redis, another pool) is stopped through the work's
// context, which is cancelled with cause ErrLost as soon as the holder notices the loss:
//
//   - The holder checks its connection every CheckInterval (a round trip that also proves the
//     lock is still held and updates role_holder.heartbeat_at). Any error means lost.
//   - A new holder waits until two CheckIntervals have passed since the previous holder's last
//     heartbeat before it calls its work. When the previous holder's backend was terminated, its
//     next check (due within one interval) fails at once; the second interval covers that round
//     trip and the cancellation reaching its work. So the old work has been told to stop before
//     the new work starts.
//   - If the holder is cut off rather than terminated, PostgreSQL keeps the lock until it ends
//     the session. The lock session sets idle_session_timeout and
//     idle_in_transaction_session_timeout to a lease of max(10×CheckInterval, 2s), so a holder
//     that vanished (host down, partition, paused process) frees the lock after the lease
//     instead of after TCP keepalive's hours. Its own checks time out after a quarter of the
//     lease (plus a quarter for the cancel request to give up), well before the lease ends.
//     A consequence: fn given to Session.Do must not hold the connection idle longer than the
//     lease; it is for database work.
//
// # What is recorded
//
// On acquisition the holder upserts role_holder (role, instance, backend_pid, since,
// heartbeat_at) on the lock connection and refreshes heartbeat_at at each check. Holders reads
// those rows joined with pg_locks, so a row whose backend no longer holds the lock reads as not
// active. The gauge msgx_leader_active{role} and the counter msgx_leader_acquired_total{role}
// expose the same to Prometheus.
package leader
