import type { SandboxErrorKind, SandboxLanguage } from './protocol.js';

declare module '../bus/events.js' {
  interface BusEventMap {
    /** An `execute_code` call handed its program to a worker. */
    'sandbox:started': {
      runId: string;
      executionId: string;
      toolCallId: string;
      language: SandboxLanguage;
      codeBytes: number;
    };
    /** A program called a tool; `toolCallId` is the nested call's id (`<execute_code id>.<n>`). */
    'sandbox:tool-call': {
      runId: string;
      executionId: string;
      toolCallId: string;
      toolName: string;
      status: string;
      durationMs: number;
    };
    'sandbox:finished': {
      runId: string;
      executionId: string;
      toolCallId: string;
      language: SandboxLanguage;
      ok: boolean;
      errorKind?: SandboxErrorKind;
      wallMs: number;
      cpuMs: number;
      toolCalls: number;
      coldStart: boolean;
    };
  }
}
