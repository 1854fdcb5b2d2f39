import type { Duplex } from 'node:stream';
import type WebSocket from 'ws';
import type { Logger } from '../util/index.js';

/** Close codes the gateway uses (RFC 6455 plus OpenClaw's habits). */
export const CloseCodes = {
  goingAway: 1001,
  protocolError: 1002,
  policyViolation: 1008,
  messageTooBig: 1009,
  internalError: 1011,
  tryAgainLater: 1013,
} as const;

/** WebSocket close reasons are limited to 123 bytes of UTF-8. */
export function closeReason(text: string): string {
  if (Buffer.byteLength(text, 'utf8') <= 123) return text;
  let out = text.slice(0, 123);
  while (Buffer.byteLength(out, 'utf8') > 120) out = out.slice(0, -1);
  return `${out}...`;
}

export interface Outbound {
  /**
   * Serialises and sends one message. `droppable` messages (intermediate chat deltas) are skipped while the
   * peer is behind; anything else that pushes the queue past the limit disconnects the peer.
   */
  send(value: unknown, options?: { droppable?: boolean }): boolean;
  /** `send` of a message already serialized as JSON text. */
  sendJson(json: string, options?: { droppable?: boolean }): boolean;
  /**
   * Writes what this event-loop turn has queued so far now, not when the turn ends: for a frame the peer is
   * to answer at once (the ping after a run's answer), which would otherwise wait for the work that follows
   * it in the same turn.
   */
  flush(): void;
  close(code: number, reason: string): void;
  readonly open: boolean;
  /** True while the peer is behind enough that droppable messages are being skipped. */
  readonly behind: boolean;
}

/**
 * The only writer of a socket. A client that stops reading is disconnected as soon as its queued outbound
 * bytes pass `maxBufferedBytes`, and the socket is destroyed after `closeGraceMs` even if the close
 * handshake cannot get through, so a slow consumer never makes the server's memory grow.
 */
export function createOutbound(
  ws: WebSocket,
  options: { maxBufferedBytes: number; closeGraceMs: number; logger: Logger },
): Outbound {
  let closing = false;
  // Frames sent in one event-loop turn leave in one write: on loopback every write wakes the reading
  // client, which the profile of a chat turn showed as tens of microseconds of kernel time per frame.
  // ws exposes no public handle on its socket; without `_socket` frames simply go out one write each.
  const socket = (ws as unknown as { _socket?: Duplex })._socket;
  let corked = false;
  // The pending uncork of the current cork: a flush cancels it, or it would uncork a later cork early and
  // split that turn's frames over two writes.
  let scheduledUncork: NodeJS.Immediate | undefined;
  const uncork = () => {
    scheduledUncork = undefined;
    corked = false;
    socket?.uncork();
  };
  const flush = () => {
    if (!corked) return;
    clearImmediate(scheduledUncork);
    uncork();
  };

  const close = (code: number, reason: string) => {
    if (closing) return;
    closing = true;
    if (ws.readyState === ws.OPEN || ws.readyState === ws.CONNECTING) ws.close(code, closeReason(reason));
    const timer = setTimeout(() => ws.terminate(), options.closeGraceMs);
    timer.unref();
    ws.once('close', () => clearTimeout(timer));
  };

  const isOpen = () => !closing && ws.readyState === ws.OPEN;

  const sendJson = (json: string, sendOptions: { droppable?: boolean } = {}): boolean => {
    if (!isOpen()) return false;
    if (sendOptions.droppable && ws.bufferedAmount > options.maxBufferedBytes / 2) return false;
    if (socket && !corked) {
      corked = true;
      socket.cork();
      scheduledUncork = setImmediate(uncork);
    }
    ws.send(json);
    if (ws.bufferedAmount > options.maxBufferedBytes) {
      options.logger.warn(
        { bufferedBytes: ws.bufferedAmount, maxBufferedBytes: options.maxBufferedBytes },
        'gateway: slow consumer disconnected',
      );
      close(CloseCodes.policyViolation, `slow consumer: more than ${options.maxBufferedBytes} bytes queued`);
      ws.terminate();
      return false;
    }
    return true;
  };

  return {
    // Nothing is serialized for a socket that takes no more frames.
    send: (value, sendOptions) => (isOpen() ? sendJson(JSON.stringify(value), sendOptions) : false),
    sendJson,
    flush,
    close,
    get open() {
      return isOpen();
    },
    get behind() {
      return ws.bufferedAmount > options.maxBufferedBytes / 2;
    },
  };
}
