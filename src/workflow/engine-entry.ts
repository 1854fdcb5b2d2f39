// What runs, loads, validates or inspects a workflow: loaded with the first workflow a process touches,
// through `loadWorkflowEngine()` in index.ts, so a runtime that offers the workflow methods but runs none
// (an in-process chat, a library) does not load the engine, its manifests' schemas or its record store.
export { createWorkflowEngine } from './engine/index.js';
export { inspectPersistedRun } from './inspector.js';
export { loadWorkflow } from './loader.js';
export { createSqlRecordStore } from './record-store.js';
export { runWorkflowRepl } from './repl.js';
export { concludeInterruptedRuns } from './run-owners.js';
export { WorkflowValidationError } from './validate.js';
