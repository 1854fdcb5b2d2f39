export {
  type ChatInbox,
  type ChatRunRecord,
  type ChatService,
  type ChatTurnInput,
  type CreateChatServiceOptions,
  createChatService,
  type PendingMessage,
  type RunningRun,
  type SlashCommand,
} from './chat-service.js';
export { type ChatConfig, chatConfigSchema } from './config.js';
export type { ChatInjectInput } from './service/inject.js';
