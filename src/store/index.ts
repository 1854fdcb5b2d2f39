export { type ChatOwnerLease, createChatOwnerLease } from './chat-owners.js';
export type {
  SqlDatabase,
  SqlDialect,
  SqlExecutor,
  SqlRunResult,
  SqlValue,
  TransactionExecutor,
  TransactionOptions,
} from './database.js';
export {
  createEventRecorder,
  defaultUnrecordedEventTypes,
  type EventRecorder,
  type EventRecorderOptions,
} from './event-recorder.js';
export {
  type AuditConfig,
  auditConfigSchema,
  createEventRetention,
  type EventRetention,
  type EventRetentionOptions,
} from './event-retention.js';
export {
  createEventStore,
  type DeletedEvents,
  type EventInput,
  type EventStore,
  type ListEventsOptions,
  type StoredEvent,
} from './event-store.js';
export { createKvStore, type KvEntry, type KvStore } from './kv-store.js';
export {
  CURRENT_SCHEMA_VERSION,
  currentSchemaVersion,
  defaultMigrationsDir,
  loadMigrations,
  type MigrateOptions,
  type MigrateResult,
  type Migration,
  migrate,
  schemaVersionOf,
} from './migrations.js';
export { sqlPlaceholders, sqlValueRows } from './placeholders.js';
export {
  createPostgresDatabase,
  type PostgresDatabase,
  type PostgresDatabaseOptions,
  redactConnectionString,
} from './postgres-database.js';
export {
  createPostgresListener,
  type PostgresListener,
  type PostgresListenerOptions,
} from './postgres-listener.js';
export {
  type CreateSessionStoreOptions,
  createSessionStore,
  formatSessionKey,
  type ListSessionsOptions,
  parseSessionKey,
  type SessionActivity,
  SessionEndedError,
  type SessionPatch,
  type SessionRecord,
  type SessionStatus,
  type SessionStore,
  type UnrepliedRun,
} from './session-store.js';
export { isUniqueViolation, mightSucceedLater } from './sql-errors.js';
export { createSqliteDatabase, type SqliteDatabase, type SqliteDatabaseOptions } from './sqlite-database.js';
export {
  type CreateStoreOptions,
  createMemoryStore,
  createStore,
  type Store,
  type StoreMode,
  sqliteFileName,
} from './store.js';
