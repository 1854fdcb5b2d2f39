// The OpenClaw-protocol frames every gateway benchmark's client sends: the `connect` answer to the
// server's challenge (an operator with write scope and token auth) and the frames it reads back.

/** A frame as the benchmarks read it: the fields they branch on. */
export interface BenchFrame {
  type?: string;
  event?: string;
  id?: string;
  payload?: { state?: string; runId?: string; type?: string };
}

/** The `connect` request answering `connect.challenge`. */
export function connectRequest(id: string, token: string): string {
  return JSON.stringify({
    type: 'req',
    id,
    method: 'connect',
    params: {
      minProtocol: 4,
      maxProtocol: 4,
      client: { id: 'bench', version: '1', platform: 'linux', mode: 'cli' },
      role: 'operator',
      scopes: ['operator.write'],
      auth: { token },
    },
  });
}

/** Whether `frame` is the final chat event of the run `runId`. */
export function isFinalOf(frame: BenchFrame, runId: string): boolean {
  return frame.event === 'chat' && frame.payload?.state === 'final' && frame.payload.runId === runId;
}
