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
  isOpen(): boolean;
  /** True while the peer is behind enough that droppable messages are being skipped. */
  isBehind(): boolean;
}

/** Ends the cork of `outbound`'s current event-loop turn (a shared function: no closure per socket). */
const uncorkLater = (outbound: SocketOutbound) => outbound.uncork();

/**
 * The only writer of a socket. A client that stops reading is disconnected as soon as its queued outbound
 * bytes pass `maxBufferedBytes`, and the socket is destroyed after `closeGraceMs` even if the close
 * handshake cannot get through, so a slow consumer never makes the server's memory grow. A class: every
 * connection has one, and its methods are then shared instead of made per connection.
 */
class SocketOutbound implements Outbound {
  #closing = false;
  // Frames sent in one event-loop turn leave in one write: on loopback every write wakes the reading
  // client, which the profile of a chat turn showed as tens of microseconds of kernel time per frame.
  // ws exposes no public handle on its socket; without `_socket` frames simply go out one write each.
  readonly #socket: Duplex | undefined;
  #corked = false;
  // The pending uncork of the current cork: a flush cancels it, or it would uncork a later cork early and
  // split that turn's frames over two writes.
  #scheduledUncork: NodeJS.Immediate | undefined;

  constructor(
    private readonly ws: WebSocket,
    private readonly options: { maxBufferedBytes: number; closeGraceMs: number; logger: Logger },
  ) {
    this.#socket = (ws as unknown as { _socket?: Duplex })._socket;
  }

  uncork(): void {
    this.#scheduledUncork = undefined;
    this.#corked = false;
    this.#socket?.uncork();
  }

  flush(): void {
    if (!this.#corked) return;
    clearImmediate(this.#scheduledUncork);
    this.uncork();
  }

  close(code: number, reason: string): void {
    if (this.#closing) return;
    this.#closing = true;
    const { ws } = this;
    if (ws.readyState === ws.OPEN || ws.readyState === ws.CONNECTING) ws.close(code, closeReason(reason));
    const timer = setTimeout(() => ws.terminate(), this.options.closeGraceMs);
    timer.unref();
    ws.once('close', () => clearTimeout(timer));
  }

  isOpen(): boolean {
    return !this.#closing && this.ws.readyState === this.ws.OPEN;
  }

  isBehind(): boolean {
    return this.ws.bufferedAmount > this.options.maxBufferedBytes / 2;
  }

  // Nothing is serialized for a socket that takes no more frames.
  send(value: unknown, sendOptions?: { droppable?: boolean }): boolean {
    return this.isOpen() ? this.sendJson(JSON.stringify(value), sendOptions) : false;
  }

  sendJson(json: string, sendOptions: { droppable?: boolean } = {}): boolean {
    if (!this.isOpen()) return false;
    if (sendOptions.droppable && this.isBehind()) return false;
    const { ws, options } = this;
    if (this.#socket && !this.#corked) {
      this.#corked = true;
      this.#socket.cork();
      this.#scheduledUncork = setImmediate(uncorkLater, this);
    }
    ws.send(json);
    if (ws.bufferedAmount > options.maxBufferedBytes) {
      options.logger.warn(
        { bufferedBytes: ws.bufferedAmount, maxBufferedBytes: options.maxBufferedBytes },
        'gateway: slow consumer disconnected',
      );
      this.close(
        CloseCodes.policyViolation,
        `slow consumer: more than ${options.maxBufferedBytes} bytes queued`,
      );
      ws.terminate();
      return false;
    }
    return true;
  }
}

export function createOutbound(
  ws: WebSocket,
  options: { maxBufferedBytes: number; closeGraceMs: number; logger: Logger },
): Outbound {
  return new SocketOutbound(ws, options);
}
