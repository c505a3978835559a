-- +goose Up
-- msgx_expect raises (SQLSTATE MX001, db.IsExpectFailed) when ok is not true, and returns true
-- otherwise. The pump sends the statements at the end of its step ① in one round trip with the
-- COMMIT (db.Pipelined, docs/performance.md): a check made in Go on a statement's result would
-- come after the server had already run the COMMIT behind it, so a statement whose check must
-- stop the commit (applied_at on a message that is still unfinished) checks on the server,
-- where a failed statement aborts the transaction and the COMMIT behind it rolls back.
-- +goose StatementBegin
CREATE FUNCTION msgx_expect(ok boolean, what text) RETURNS boolean
    LANGUAGE plpgsql AS $$
BEGIN
    IF ok IS NOT TRUE THEN
        RAISE EXCEPTION '%', what USING ERRCODE = 'MX001';
    END IF;
    RETURN true;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION msgx_expect(boolean, text);
