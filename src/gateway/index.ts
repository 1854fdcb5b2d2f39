export { type GatewayConfig, gatewayConfigSchema } from './config.js';
export type { GatewayConnection, GatewayLimits } from './connection.js';
export { type CoreMethodsOptions, registerCoreMethods } from './core-methods.js';
export {
  type DevicePairings,
  deviceAuthPayload,
  deviceIdForPublicKey,
  type PairedDevice,
  secretsEqual,
} from './device-auth.js';
export type { EventHub, RunRef, RunWireEvent } from './event-hub.js';
export { isLoopbackHost, namesLoopbackServer, parseHostHeader } from './host-header.js';
export type { DedupeCache } from './idempotency.js';
export {
  type AsyncResult,
  acceptedThenFinal,
  type ClientInfo,
  createMethodTable,
  type ForwardedEvent,
  type ForwardOptions,
  type GatewayProtocol,
  isAsyncResult,
  type MethodContext,
  type MethodDefinition,
  type MethodTable,
} from './method-table.js';
export { missingScope, OperatorScopes, scopeSatisfied } from './scopes.js';
export type { GatewayServer, GatewayServerOptions, HttpRoute } from './server.js';
export type {
  AgentDirectoryService,
  ChatHistoryMessage,
  ChatRole,
  ChatRunResult,
  ChatSource,
  GatewayChatService,
  GatewayMemoryItem,
  GatewayServices,
  HealthService,
  MemoryQueryService,
  ModelCatalogService,
  ModelEntry,
  SessionPreview,
  SessionService,
  SessionSummary,
} from './services.js';
export { mainSessionKey, resolveSessionKey } from './session-key.js';
export type { StaticSite } from './static-site.js';

/**
 * The server (HTTP, WebSocket, both protocols' connections) and the dashboard's static site, loaded when a
 * runtime starts serving: a runtime used in-process (`agentd send` and `chat` without `--url`, `mcp`, `acp`,
 * a program embedding the library) does not load them, nor `ws`.
 */
export async function loadGatewayServer() {
  const [{ createGatewayServer }, { createStaticSite }] = await Promise.all([
    import('./server.js'),
    import('./static-site.js'),
  ]);
  return { createGatewayServer, createStaticSite };
}
