import { WebSocketServer } from 'ws';
import type { DurableFloor, FloorTurn } from './durable-floor.js';

/**
 * The floor for the gateway benchmarks: a bare `ws` server that answers the OpenClaw handshake and every
 * chat turn with frames of the same sizes as agentd's (measured in the agentd run), with no protocol logic.
 * With `durable`, a turn's writes are committed as agentd must commit them: the message before the first
 * frame (the acknowledgement), the reply before the others. Returns the port it listens on (loopback).
 */
export async function serveEcho(
  helloBytes: number,
  turnFrameBytes: number[],
  durable?: DurableFloor,
): Promise<number> {
  const pad = (text: string, bytes: number) =>
    text.length >= bytes
      ? text
      : `${text.slice(0, -1)},"p":"${'x'.repeat(Math.max(0, bytes - text.length - 7))}"}`;
  const challenge = JSON.stringify({
    type: 'event',
    event: 'connect.challenge',
    payload: { nonce: 'n', ts: 0 },
  });
  const wss = new WebSocketServer({
    host: '127.0.0.1',
    port: 0,
    perMessageDeflate: false,
    clientTracking: false,
  });
  /** Turns that arrived in one event-loop turn share each of their two commits (group commit). */
  let arrived: Array<{ turn: FloorTurn; send: (index: number) => void }> = [];
  const commitArrived = () => {
    const group = arrived;
    arrived = [];
    durable!.accept(group.map((member) => member.turn));
    for (const member of group) member.send(0);
    durable!.finish(group.map(({ turn }) => ({ ...turn, text: `[local model] Noted: "${turn.text}".` })));
    for (const member of group)
      for (let index = 1; index < turnFrameBytes.length; index++) member.send(index);
  };
  wss.on('connection', (ws) => {
    let connected = false;
    ws.send(challenge);
    ws.on('message', (data) => {
      const text = data.toString();
      const id = /"id":"([^"]+)"/.exec(text)?.[1] ?? '';
      if (!connected) {
        connected = true;
        ws.send(
          pad(JSON.stringify({ type: 'res', id, ok: true, payload: { type: 'hello-ok' } }), helloBytes),
        );
        return;
      }
      const runId = /"idempotencyKey":"([^"]+)"/.exec(text)?.[1] ?? '';
      const send = (index: number) => {
        const last = index === turnFrameBytes.length - 1;
        const frame =
          index === 0
            ? { type: 'res', id, ok: true, payload: { runId, status: 'started' } }
            : {
                type: 'event',
                event: last ? 'chat' : 'agent',
                payload: { runId, state: last ? 'final' : 'x' },
                seq: index,
              };
        ws.send(pad(JSON.stringify(frame), turnFrameBytes[index]!));
      };
      if (!durable) {
        for (let index = 0; index < turnFrameBytes.length; index++) send(index);
        return;
      }
      const sessionKey = /"sessionKey":"([^"]+)"/.exec(text)?.[1] ?? '';
      const message = /"message":"([^"]*)"/.exec(text)?.[1] ?? '';
      arrived.push({ turn: { sessionKey, runId, text: message }, send });
      if (arrived.length === 1) setImmediate(commitArrived);
    });
  });
  await new Promise((resolve) => wss.once('listening', resolve));
  return (wss.address() as { port: number }).port;
}
