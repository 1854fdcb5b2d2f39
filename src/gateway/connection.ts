import type WebSocket from 'ws';
import type { Clock, ErrorJson, IdGenerator, Logger } from '../util/index.js';
import { AgentdError, errorForClient } from '../util/index.js';
import type { EventHub } from './event-hub.js';
import type { GatewayProtocol, MethodTable } from './method-table.js';
import type { GatewayServices } from './services.js';

export interface GatewayLimits {
  /** Largest WebSocket message accepted (ws `maxPayload`); bigger ones close the socket with 1009. */
  maxFrameBytes: number;
  /** Largest chat message text, in UTF-8 bytes; bigger ones get PAYLOAD_TOO_LARGE and the socket stays open. */
  maxMessageBytes: number;
  /** Outbound bytes queued for one client before it is disconnected as a slow consumer. */
  maxBufferedBytes: number;
  maxConnections: number;
  /** Largest frame accepted before the OpenClaw handshake completes. */
  preConnectMaxBytes: number;
  handshakeTimeoutMs: number;
  /**
   * Time a TCP connection gets to send the headers of its first request (or upgrade); sockets that stay
   * silent or trickle bytes are destroyed, so idle connections cannot pile up below `maxConnections`.
   */
  requestTimeoutMs: number;
  /** OpenClaw `tick` period; also the transport ping period for both protocols. */
  tickIntervalMs: number;
  /** Requests one connection may have running at once. */
  maxPendingRequests: number;
}

export const defaultGatewayLimits: GatewayLimits = {
  maxFrameBytes: 4 * 1024 * 1024,
  maxMessageBytes: 256 * 1024,
  maxBufferedBytes: 8 * 1024 * 1024,
  maxConnections: 4096,
  preConnectMaxBytes: 64 * 1024,
  handshakeTimeoutMs: 10_000,
  requestTimeoutMs: 10_000,
  tickIntervalMs: 15_000,
  maxPendingRequests: 64,
};

/** What both protocol adapters get from the server. */
export interface ConnectionDeps {
  table: MethodTable;
  hub: EventHub;
  services: GatewayServices;
  limits: GatewayLimits;
  serverVersion: string;
  clock: Clock;
  idGenerator: IdGenerator;
  logger: Logger;
  startedAt: number;
  onClose(connection: GatewayConnection): void;
}

export interface GatewayConnection {
  readonly connId: string;
  readonly protocol: GatewayProtocol;
  /** Runs every tick interval: protocol keepalive plus transport liveness (ping/pong). */
  tick(): void;
  /** Tells the client why and closes with 1001. */
  shutdown(reason: string): void;
  readonly socket: WebSocket;
}

export const closeGraceMs = 2_000;

export function isLoopbackAddress(address: string | undefined): boolean {
  if (!address) return false;
  return address === '::1' || address.startsWith('127.') || address.startsWith('::ffff:127.');
}

/**
 * The wire shape of an error. Errors agentd raised on purpose keep their message; anything else is a bug
 * whose details go to the log, not to the client.
 */
export function toWireError(error: unknown, logger: Logger): ErrorJson {
  if (!AgentdError.isInstance(error))
    logger.error({ err: error }, 'gateway: request failed with an unexpected error');
  else if (error.fault === 'system')
    logger.error({ err: error, code: error.code }, 'gateway: request failed');
  return errorForClient(error, 'internal error; see the agentd log');
}

/** Starts ping/pong liveness on a socket; returns the per-tick check. */
export function createLiveness(ws: WebSocket): () => void {
  let alive = true;
  ws.on('pong', () => {
    alive = true;
  });
  return () => {
    if (!alive) {
      ws.terminate();
      return;
    }
    alive = false;
    if (ws.readyState === ws.OPEN) ws.ping();
  };
}

export function rawToString(data: WebSocket.RawData): string {
  if (Buffer.isBuffer(data)) return data.toString('utf8');
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data).toString('utf8');
}

export function rawByteLength(data: WebSocket.RawData): number {
  if (Buffer.isBuffer(data)) return data.length;
  if (Array.isArray(data)) return data.reduce((sum, part) => sum + part.length, 0);
  return data.byteLength;
}
