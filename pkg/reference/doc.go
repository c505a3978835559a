// Package reference holds the pure rules of the reference data (the R-REF and R-RSTA rules): what a record of
// one of the 13 categories is stored as (the ignore and truncate list of R-REF-5, repeated children
// as ordered arrays), the whole-batch check of a DNLD or RESP, and the resource status windows of
// R-RSTA-2. It does no I/O; pkg/refstore writes what it decides.
//
// These rules are deliberately not the flight rules of package flight: for reference data an
// empty element means "data not available" and is stored as such, and only STYP=DEL deletes.
package reference
