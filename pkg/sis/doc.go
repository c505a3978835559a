// Package sis is the SIS (AODB) message codec: it turns one inbox row's text into a typed
// Message, or into a *DecodeError classed MALFORMED (the message is illegal: DEAD, never
// replayed) or CODEC_ERROR (well formed, but this codec version cannot interpret it: FAILED,
// replayable). It also converts raw compat-HTTP bytes to text (BytesToText), computes the one
// business identity (Identity) and writes the outbound RQFD/RQRD requests (Encoder).
//
// Decoding is a single strict encoding/xml token pass into a flat element tree, then an
// interpretation step per TYPE. Input is bounded by size, depth and element count, entities are
// never expanded, DOCTYPE is refused, and no input makes it panic (see FuzzDecode).
//
// The rules — what is MALFORMED and what is CODEC_ERROR, absent versus empty, charsets, limits,
// and the assumed RSTA shape — are written down in docs/codec.md.
package sis
