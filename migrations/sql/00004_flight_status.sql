-- +goose Up
-- The statuses BOTM and LACL set and reset (R-FLOP-1, SIS 3.21 and 3.35): derived from the
-- time they follow, kept as columns so the stored row is the published state without re-deriving.
ALTER TABLE flight_schd
    ADD COLUMN boarding_status  text CHECK (boarding_status IN ('BOARDING')),
    ADD COLUMN last_call_status text CHECK (last_call_status IN ('LAST_CALL'));

-- +goose Down
ALTER TABLE flight_schd DROP COLUMN last_call_status, DROP COLUMN boarding_status;
