/**
 * Stable error codes of workflow runs (stage and task errors, documented in docs/workflows.md). They end a
 * stage or a task; they are not thrown to callers, so they live beside the engine rather than in
 * `util/errors.ts`.
 */
export const WorkflowErrorCodes = {
  /** An `always_fail` exit was reached. */
  alwaysFail: 'ALWAYS_FAIL',
  /** An agent node lists tools but the engine has no engage loop to run them. */
  agentToolsUnavailable: 'AGENT_TOOLS_UNAVAILABLE',
  /** A split's children did not all succeed. */
  childrenFailed: 'CHILDREN_FAILED',
  /** A stage's input does not match the node's input schema. */
  inputInvalid: 'INPUT_INVALID',
  /** A merge child failed, so the merge cannot complete. */
  mergeChildFailed: 'MERGE_CHILD_FAILED',
  /** Two merged branches wrote the same key differently. */
  mergeConflict: 'MERGE_CONFLICT',
  /** An agent node's model call or reply failed. */
  nodeError: 'NODE_ERROR',
  /** A node's output does not match its output schema. */
  outputInvalid: 'OUTPUT_INVALID',
  /** policy.yaml denied the node or the tool. */
  policyDenied: 'POLICY_DENIED',
  /** A decision node chose a label none of its edges carries. */
  routeUnknownLabel: 'ROUTE_UNKNOWN_LABEL',
  /** A split node's output is not a list of items to fan out. */
  splitInvalidOutput: 'SPLIT_INVALID_OUTPUT',
  /** The process running the run stopped before the run ended (its owner's lease lapsed: run-owners.ts). */
  interrupted: 'INTERRUPTED',
  /** A tool was called with input its input_schema refuses, or misbehaved. */
  toolMisuse: 'TOOL_MISUSE',
  /**
   * Not a stage's error: some of a finished run's records could not be written (a full disk); the run's
   * result names it in `recordsNotWritten`, whatever the run's status.
   */
  recordsNotWritten: 'RECORDS_NOT_WRITTEN',
} as const;
