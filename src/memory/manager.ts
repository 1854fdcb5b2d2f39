import { errorCodeOf, markSpanFailed, type Span, SpanAttributes, withSpan } from '../telemetry/index.js';
import type { Clock, Logger } from '../util/index.js';
import { silentLogger, systemClock } from '../util/index.js';
import type { MemoryService } from './service.js';
import type { SessionStats } from './types.js';

export interface MemoryManagerOptions {
  memory: MemoryService;
  /** Defaults to `memory.config.managerIntervalMs`. */
  intervalMs?: number;
  clock?: Clock;
  logger?: Logger;
  /** Apply retention and embedding backfill every this many ticks (default: about every 30 minutes). */
  retentionEveryTicks?: number;
  /** Told the code of each failure the manager logs and moves past (for the errors-by-worker metric). */
  onError?: (code: string) => void;
}

export interface MemoryManagerTickResult {
  sessionsChecked: number;
  summaries: number;
  snapshots: number;
  unloaded: number;
  embeddingsBackfilled: number;
  retention: boolean;
}

export interface MemoryManager {
  start(): void;
  /** Stops the schedule and waits for a running tick. */
  stop(): Promise<void>;
  /** One maintenance pass over every RAM context loaded in this process. Ticks never overlap. */
  tick(): Promise<MemoryManagerTickResult>;
  readonly running: boolean;
}

/**
 * The background memory manager. On its own timer, for each loaded session it:
 * summarizes the oldest entries while the context is over `summarizeRatio` of its entry or token limit
 * (at most `maxSummariesPerTick`), summarizes an idle session down to `keepRecentEntries`, persists a
 * snapshot when it changed something, and unloads RAM contexts idle for `unloadIdleAfterMs`. Pinned
 * entries (a running chat turn) are never touched: the service skips them. Every change is published as
 * `memory:event` by the service.
 */
export function createMemoryManager(options: MemoryManagerOptions): MemoryManager {
  const { memory } = options;
  const config = memory.config;
  const intervalMs = options.intervalMs ?? config.managerIntervalMs;
  const clock = options.clock ?? systemClock;
  const logger = (options.logger ?? silentLogger).child({ component: 'memory-manager' });
  const retentionEveryTicks =
    options.retentionEveryTicks ?? Math.max(1, Math.round((30 * 60 * 1000) / intervalMs));
  const thresholds = config.thresholds;
  let timer: ReturnType<typeof setInterval> | undefined;
  let current: Promise<MemoryManagerTickResult> | undefined;
  let ticks = 0;

  const overThreshold = (stats: SessionStats) =>
    stats.activeEntries > config.maxActiveEntries * thresholds.summarizeRatio ||
    stats.activeTokens > config.maxActiveTokens * thresholds.summarizeRatio;

  const maintain = async (initial: SessionStats, result: MemoryManagerTickResult) => {
    const ref = { sessionId: initial.sessionId, sessionKey: initial.sessionKey, agentId: initial.agentId };
    const keepLatest = Math.min(
      thresholds.keepRecentEntries,
      Math.floor((config.maxActiveEntries * thresholds.summarizeRatio) / 2),
    );
    let stats = initial;
    let changed = false;
    for (let round = 0; round < thresholds.maxSummariesPerTick; round++) {
      const stale =
        clock.now() - stats.lastActiveMs >= thresholds.staleAfterMs &&
        stats.activeEntries > thresholds.keepRecentEntries + 1;
      if (!overThreshold(stats) && !stale) break;
      const maxEntries = overThreshold(stats)
        ? config.summarizeBatch
        : Math.min(config.summarizeBatch, stats.activeEntries - thresholds.keepRecentEntries);
      const outcome = await memory.summarize(ref, {
        maxEntries,
        keepLatest: overThreshold(stats) ? Math.max(1, keepLatest) : thresholds.keepRecentEntries,
        reason: overThreshold(stats) ? 'threshold' : 'stale',
      });
      if (outcome.summarizedIds.length === 0) break;
      changed = true;
      result.summaries++;
      stats = await memory.stats(ref);
    }
    if (changed) {
      await memory.snapshot(ref, 'memory-manager auto snapshot');
      result.snapshots++;
    } else if (clock.now() - stats.lastActiveMs >= thresholds.unloadIdleAfterMs && stats.pinned === 0) {
      if (await memory.unload(ref.sessionId)) result.unloaded++;
    }
  };

  const runTick = async (span: Span): Promise<MemoryManagerTickResult> => {
    ticks++;
    const result: MemoryManagerTickResult = {
      sessionsChecked: 0,
      summaries: 0,
      snapshots: 0,
      unloaded: 0,
      embeddingsBackfilled: 0,
      retention: false,
    };
    for (const stats of memory.loadedSessions()) {
      result.sessionsChecked++;
      try {
        await withSpan(
          'memory_maintain',
          { attributes: { [SpanAttributes.sessionKey]: stats.sessionKey } },
          () => maintain(stats, result),
        );
      } catch (error) {
        // One session's failure (e.g. archived meanwhile) must not stop maintenance of the others.
        options.onError?.(errorCodeOf(error));
        logger.warn({ err: error, sessionKey: stats.sessionKey }, 'memory maintenance failed for a session');
      }
    }
    if (ticks % retentionEveryTicks === 0) {
      try {
        await memory.applyRetention();
        result.retention = true;
        result.embeddingsBackfilled = await memory.backfillEmbeddings(500);
      } catch (error) {
        markSpanFailed(span, errorCodeOf(error));
        options.onError?.(errorCodeOf(error));
        logger.warn({ err: error }, 'memory retention failed');
      }
    }
    return result;
  };

  const tick = (): Promise<MemoryManagerTickResult> => {
    if (current) return current;
    // A pass of its own (a timer started it), not part of whatever was active.
    current = withSpan('memory_manager tick', { root: true }, async (span) => {
      const result = await runTick(span);
      span.setAttributes({
        'agentd.memory.sessions_checked': result.sessionsChecked,
        'agentd.memory.summaries': result.summaries,
        'agentd.memory.unloaded': result.unloaded,
      });
      return result;
    }).finally(() => {
      current = undefined;
    });
    return current;
  };

  return {
    start() {
      if (timer) return;
      timer = setInterval(() => {
        tick().catch((error) => logger.error({ err: error }, 'memory manager tick failed'));
      }, intervalMs);
      timer.unref?.();
    },
    async stop() {
      if (timer) clearInterval(timer);
      timer = undefined;
      if (current) await current.catch(() => undefined);
    },
    tick,
    get running() {
      return timer !== undefined;
    },
  };
}
