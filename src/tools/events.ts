declare module '../bus/events.js' {
  interface BusEventMap {
    /** A tool call was refused by policy and not run; the model got an `is_error` result. */
    'tool:policy-denied': {
      runId: string;
      agentId: string;
      toolCallId: string;
      toolName: string;
      reason: string;
      rule?: string;
    };
    /** A `before_tool_call` or `after_tool_call` hook blocked a call or withheld its result. */
    'tool:hook-blocked': {
      runId: string;
      toolCallId: string;
      toolName: string;
      hook: string;
      reason: string;
      phase: 'before' | 'after';
    };
  }
}

export {};
