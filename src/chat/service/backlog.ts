import type { PendingMessage } from '../chat-service.js';
import type { ChatContext } from './context.js';
import type { QueueSlot } from './queue.js';
import type { OwnerLives } from './recovery.js';
import { startTurn } from './turn.js';

/** A pending message left in the inbox at start: what it takes to read it again, not its text. */
interface LeftInInbox {
  runId: string;
  sessionKey: string;
}

const byArrival = (a: PendingMessage, b: PendingMessage) =>
  a.receivedAt - b.receivedAt || (a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : 0);

/**
 * The durable inbox at start, within the queue's bounds: `resume` starts the pending messages in arrival
 * order while their session and the whole queue have room (`chat.maxQueuedTurnsPerSession`,
 * `chat.maxQueuedTurns`) and keeps only the run ids of the rest, whose rows stay in the inbox. Each time a
 * queued turn leaves the queue the oldest of those whose session has room is read again (`ChatInbox.get`)
 * and started. An inbox without `get` leaves them for the next start. A backlog over the bounds comes from
 * an older build (no bounds) or from several processes sharing the store.
 */
export class InboxBacklog {
  /** In arrival order; a Map, as its keys are run ids made fresh for each message. */
  readonly #left = new Map<string, LeftInInbox>();
  /** One message is read at a time, so they start in arrival order. */
  #reading = false;
  #stopped = false;

  constructor(private readonly ctx: ChatContext) {}

  /**
   * Starts what the queue has room for, but the messages of an owner that `lives` says may be alive (another
   * process sharing the database, which runs them itself); returns their run ids.
   */
  async resume(lives: OwnerLives): Promise<string[]> {
    const { ctx } = this;
    const inbox = ctx.options.inbox;
    if (!inbox) return [];
    // One read of the whole inbox (the kv store has no paged read); only what starts keeps its text.
    const pending = (await inbox.list()).sort(byArrival);
    const resumed: string[] = [];
    let leftBehind = 0;
    for (const item of pending) {
      if (ctx.live.has(item.runId) || ctx.finished.has(item.runId) || this.#left.has(item.runId)) continue;
      if (lives(item)) continue;
      if (!ctx.queue.hasRoom(item.sessionKey)) {
        leftBehind++;
        if (inbox.get) this.#left.set(item.runId, { runId: item.runId, sessionKey: item.sessionKey });
        continue;
      }
      this.#start(item, ctx.queue.reserve(item.sessionKey));
      resumed.push(item.runId);
    }
    if (leftBehind > 0)
      ctx.logger.warn(
        {
          resumed: resumed.length,
          left: leftBehind,
          maxQueuedTurns: ctx.queue.maxTotal,
          maxQueuedTurnsPerSession: ctx.queue.maxPerSession,
        },
        inbox.get
          ? 'the chat inbox holds more messages than the queue takes; the rest start as queued turns do'
          : 'the chat inbox holds more messages than the queue takes; the rest wait for the next start',
      );
    if (this.#left.size > 0 && !this.#stopped) ctx.queue.onRelease = () => this.#takeNext();
    return resumed;
  }

  /** At shutdown: nothing more starts; what is left stays in the inbox for the next start. */
  stop(): void {
    this.#stopped = true;
    this.#left.clear();
    this.ctx.queue.onRelease = undefined;
  }

  #start(message: PendingMessage, slot: QueueSlot): void {
    this.ctx.logger.warn(
      { runId: message.runId, sessionKey: message.sessionKey },
      'resuming a chat message accepted before a restart',
    );
    startTurn(this.ctx, message, undefined, slot);
  }

  /** Takes the oldest message left behind whose session has room, unless one is being read. */
  #takeNext(): void {
    if (this.#reading || this.#stopped) return;
    const { queue } = this.ctx;
    for (const [runId, left] of this.#left) {
      if (queue.size >= queue.maxTotal) return;
      if (!queue.hasRoom(left.sessionKey)) continue;
      this.#left.delete(runId);
      this.#reading = true;
      void this.#read(left, queue.reserve(left.sessionKey));
      return;
    }
  }

  async #read(left: LeftInInbox, slot: QueueSlot): Promise<void> {
    const { ctx } = this;
    let message: PendingMessage | undefined;
    try {
      message = await ctx.options.inbox?.get?.(left.runId);
    } catch (error) {
      ctx.logger.warn(
        { err: error, runId: left.runId },
        'could not read a chat message left in the inbox; it is tried again when a queued turn starts',
      );
      // First again. Its slot goes back while `reading` holds, so the failing store is not asked again at once.
      if (!this.#stopped) {
        const rest = [...this.#left];
        this.#left.clear();
        this.#left.set(left.runId, left);
        for (const [runId, entry] of rest) this.#left.set(runId, entry);
      }
      slot.release();
      this.#reading = false;
      return;
    }
    this.#reading = false;
    // Gone (answered by another process), or sent again with its key since and started.
    if (this.#stopped || !message || ctx.live.has(left.runId) || ctx.finished.has(left.runId)) {
      slot.release();
      if (this.#stopped) return;
    } else this.#start(message, slot);
    this.#takeNext();
  }
}
