package leader

// PipelineLockKey is pipelineLockKey, for the test that pins every lock key.
const PipelineLockKey = pipelineLockKey
