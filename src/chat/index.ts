export {
  type ChatRunRecord,
  type ChatService,
  type ChatTurnInput,
  type CreateChatServiceOptions,
  createChatService,
  type SlashCommand,
} from './chat-service.js';
