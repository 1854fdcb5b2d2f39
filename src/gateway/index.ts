export { type GatewayConfig, gatewayConfigSchema } from './config.js';
export { defaultGatewayLimits, type GatewayConnection, type GatewayLimits } from './connection.js';
export { type CoreMethodsOptions, registerCoreMethods } from './core-methods.js';
export {
  type DevicePairings,
  deviceAuthPayload,
  deviceIdForPublicKey,
  type PairedDevice,
} from './device-auth.js';
export { chatDeltaIntervalMs, type EventHub, type RunRef, type RunWireEvent } from './event-hub.js';
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
export { maxProtocolVersion, minProtocolVersion } from './openclaw-connection.js';
export { CloseCodes } from './outbound.js';
export { missingScope, OperatorScopes, scopeSatisfied } from './scopes.js';
export {
  createGatewayServer,
  type GatewayServer,
  type GatewayServerOptions,
  type HttpRoute,
  isLoopbackHost,
} from './server.js';
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
export { spiderwebCapabilities } from './spiderweb-connection.js';
export { createStaticSite, dashboardContentSecurityPolicy, type StaticSite } from './static-site.js';
