import { z } from 'zod';
import type { Bus, BusEventMap } from '../bus/index.js';
import { completeModel, type LanguageModel } from '../model/index.js';
import { type Clock, type Logger, silentLogger, systemClock } from '../util/index.js';
import { outcomeSummary, type WorkItem, type WorkQueue } from '../work/index.js';
import './events.js';

/** OpenClaw's acknowledgement token: a reply that is only this (± a short remainder) is not shown. */
export const heartbeatOkToken = 'HEARTBEAT_OK';

const clockTime = z.string().regex(/^([01]\d|2[0-3]):[0-5]\d$/, 'HH:MM (24-hour)');

/** Options under `heartbeat:` in agentd.yaml. */
export const heartbeatConfigSchema = z
  .object({
    enabled: z.boolean().default(true),
    /** The cheap, non-model sweep for blocked and stalled work. */
    sweepIntervalMs: z.number().int().min(100).default(5_000),
    /** Model-driven checks (only when a checklist is configured); 0 turns them off. */
    modelIntervalMs: z
      .number()
      .int()
      .min(0)
      .default(30 * 60 * 1000),
    /** Running longer than this, or ready but not started for this long, counts as stalled. */
    stallAfterMs: z
      .number()
      .int()
      .min(1_000)
      .default(15 * 60 * 1000),
    /** Model checks run only inside this window (local time of `timezone`, default the system's). */
    activeHours: z.object({ start: clockTime, end: clockTime, timezone: z.string().optional() }).optional(),
    /** Speculative proposals are created paused unless this is on. */
    autoRunSpeculative: z.boolean().default(false),
    /** A HEARTBEAT_OK reply with at most this much other text is suppressed. */
    ackMaxChars: z.number().int().min(0).default(300),
  })
  .default({
    enabled: true,
    sweepIntervalMs: 5_000,
    modelIntervalMs: 30 * 60 * 1000,
    stallAfterMs: 15 * 60 * 1000,
    autoRunSpeculative: false,
    ackMaxChars: 300,
  });

export type HeartbeatConfig = z.infer<typeof heartbeatConfigSchema>;

export interface HeartbeatPolicy {
  autoRunSpeculative: boolean;
}

export interface CreateHeartbeatOptions {
  queue: WorkQueue;
  bus: Bus;
  clock?: Clock;
  logger?: Logger;
  config?: Partial<HeartbeatConfig>;
  /** Agents to report on even when they have no work; agents with work are always included. */
  agents?: () => ReadonlyArray<string>;
  /** Agent of items submitted without one. */
  defaultAgentId?: string;
  /** Model-driven checks need both a model and a checklist (HEARTBEAT.md text). */
  model?: LanguageModel;
  heartbeatChecklist?: string | ((agentId: string) => string | undefined);
  /** True while a user-led turn of the agent runs: model checks wait for it to end. */
  isUserTurnActive?: (agentId: string) => boolean;
  policy?: HeartbeatPolicy | ((agentId: string) => HeartbeatPolicy);
  /** A user-visible nudge from a model check (the reply without HEARTBEAT_OK). */
  onNudge?: (agentId: string, message: string) => void;
  /** Kind of speculative work items. */
  taskKind?: string;
  /**
   * Kinds of system work (memory maintenance): counted, but never reported as blocked or stalled, so they
   * get no speculative proposals that would clutter the agents' work.
   */
  systemKinds?: ReadonlyArray<string>;
}

export interface SweepResult {
  agents: string[];
  blocked: string[];
  stalled: string[];
  proposals: string[];
  modelChecks: Array<{
    agentId: string;
    outcome: 'nudge' | 'ok' | 'unchanged' | 'user-turn' | 'outside-active-hours' | 'error';
  }>;
}

export interface Heartbeat {
  start(): void;
  stop(): Promise<void>;
  /** One sweep now (the interval calls this); model checks that are due run as part of it. */
  sweep(): Promise<SweepResult>;
}

/** Strips a leading or trailing HEARTBEAT_OK; `ok` when what is left is short enough to drop. */
export function stripHeartbeatOk(reply: string, ackMaxChars: number): { ok: boolean; text: string } {
  let text = reply.trim();
  let hadToken = false;
  if (text.startsWith(heartbeatOkToken)) {
    text = text.slice(heartbeatOkToken.length).trim();
    hadToken = true;
  }
  if (text.endsWith(heartbeatOkToken)) {
    text = text.slice(0, -heartbeatOkToken.length).trim();
    hadToken = true;
  }
  return { ok: hadToken && text.length <= ackMaxChars, text };
}

function minutesOfDay(at: number, timezone: string | undefined): number {
  const parts = new Intl.DateTimeFormat('en-GB', {
    hour: '2-digit',
    minute: '2-digit',
    hour12: false,
    timeZone: timezone,
  }).formatToParts(new Date(at));
  const hour = Number(parts.find((part) => part.type === 'hour')?.value ?? 0) % 24;
  const minute = Number(parts.find((part) => part.type === 'minute')?.value ?? 0);
  return hour * 60 + minute;
}

/** Inside `start`–`end`; a window whose end is before its start runs over midnight. */
export function withinActiveHours(
  at: number,
  window: { start: string; end: string; timezone?: string },
): boolean {
  const toMinutes = (value: string) => Number(value.slice(0, 2)) * 60 + Number(value.slice(3, 5));
  const now = minutesOfDay(at, window.timezone);
  const start = toMinutes(window.start);
  const end = toMinutes(window.end);
  if (start === end) return true;
  return start < end ? now >= start && now < end : now >= start || now < end;
}

/** A wait as people say it: "1.9 s", "42 s", "15 min", "2 h 5 min" (never rounded up to a minute). */
export function formatWait(ms: number): string {
  const value = Math.max(0, ms);
  if (value < 10_000) return `${(Math.floor(value / 100) / 10).toFixed(1)} s`;
  if (value < 60_000) return `${Math.floor(value / 1_000)} s`;
  if (value < 3_600_000) return `${Math.floor(value / 60_000)} min`;
  const hours = Math.floor(value / 3_600_000);
  const rest = Math.floor((value % 3_600_000) / 60_000);
  return rest > 0 ? `${hours} h ${rest} min` : `${hours} h`;
}

type HeartbeatEvent = BusEventMap['agent:heartbeat'];
type HeartbeatCounts = HeartbeatEvent['counts'];

interface Concern {
  item: WorkItem;
  condition: 'blocked' | 'stalled';
  reason: string;
  sinceMs: number;
}

/** Low-risk, read-only next steps for a stuck item, each with the reason it is safe to try. */
function proposalsFor(concern: Concern): Array<{ title: string; description: string; rationale: string }> {
  const { item } = concern;
  const title = item.title.slice(0, 80);
  const waited = formatWait(concern.sinceMs);
  if (concern.condition === 'blocked' && item.waitingOn && item.waitingOn.length > 0) {
    return [
      {
        title: `Check the child work of "${title}"`,
        description: `Read the state and ledger of ${item.waitingOn.join(', ')} and report what keeps them from finishing.`,
        rationale: `"${title}" has waited ${waited} on child work; reading the children's state and ledgers changes nothing, so it is low-risk.`,
      },
    ];
  }
  if (concern.condition === 'blocked') {
    return [
      {
        title: `Find what "${title}" needs to continue`,
        description: `"${title}" is blocked: ${concern.reason}. Gather the missing information (read-only) and report it.`,
        rationale: `"${title}" has been blocked for ${waited} (${concern.reason}); collecting what it needs is read-only and cannot make things worse.`,
      },
    ];
  }
  if (item.state === 'running') {
    return [
      {
        title: `Review the progress of "${title}"`,
        description: `"${title}" (${item.id}) has been running for ${waited}. Read its ledger and summarise progress and obstacles.`,
        rationale: `It has run ${waited} without finishing; a read-only review of its ledger finds out whether it is stuck.`,
      },
    ];
  }
  return [
    {
      title: `Find out why "${title}" has not started`,
      description: `"${title}" (${item.id}) has been ready for ${waited} but no worker took it. Check worker capacity and report.`,
      rationale: `It has waited ${waited} for a worker; checking capacity is read-only.`,
    },
  ];
}

/**
 * The heartbeat (as OpenClaw's): a cheap sweep every few seconds that finds blocked
 * and stalled work, reports it and proposes speculative low-risk next tasks; plus optional model-driven
 * checks with HEARTBEAT.md as the checklist, in an isolated session, skipped when nothing changed and
 * never during a user-led turn.
 */
export function createHeartbeat(options: CreateHeartbeatOptions): Heartbeat {
  const { queue, bus } = options;
  const clock = options.clock ?? systemClock;
  const logger = (options.logger ?? silentLogger).child({ component: 'heartbeat' });
  const config = heartbeatConfigSchema.parse(options.config ?? {});
  const defaultAgentId = options.defaultAgentId ?? 'main';
  const taskKind = options.taskKind ?? 'task';
  const systemKinds = new Set(options.systemKinds ?? []);
  const policyFor = (agentId: string): HeartbeatPolicy =>
    typeof options.policy === 'function'
      ? options.policy(agentId)
      : (options.policy ?? { autoRunSpeculative: config.autoRunSpeculative });
  const checklistFor = (agentId: string): string | undefined =>
    typeof options.heartbeatChecklist === 'function'
      ? options.heartbeatChecklist(agentId)
      : options.heartbeatChecklist;

  /** `<id>:<condition>:<updatedAt>` of concerns already reported, so each is reported once. */
  const reported = new Set<string>();
  const lastFingerprint = new Map<string, string>();
  const lastModelFingerprint = new Map<string, string>();
  const lastModelCheckAt = new Map<string, number>();
  const deferredForUserTurn = new Set<string>();
  let timer: NodeJS.Timeout | undefined;
  let sweeping: Promise<SweepResult> | undefined;
  const startedAt = clock.now();

  const agentOf = (item: WorkItem) => item.agentId ?? defaultAgentId;

  const modelCheck = async (
    agentId: string,
    items: WorkItem[],
    counts: HeartbeatCounts,
    concerns: Concern[],
    now: number,
  ): Promise<SweepResult['modelChecks'][number]['outcome'] | undefined> => {
    const checklist = checklistFor(agentId);
    if (!options.model || !checklist || config.modelIntervalMs === 0) return undefined;
    const last = lastModelCheckAt.get(agentId) ?? startedAt;
    if (now - last < config.modelIntervalMs) return undefined;
    // Every end of a model check, skipped or not, is reported as one `agent:heartbeat` of kind `model`.
    const publishModelHeartbeat = (
      outcome: Pick<HeartbeatEvent, 'changed'> & Partial<Pick<HeartbeatEvent, 'skipped' | 'message'>>,
    ) => bus.publish('agent:heartbeat', { agentId, kind: 'model', counts, ...outcome }, { agentId });
    const publishSkip = (skipped: NonNullable<HeartbeatEvent['skipped']>) =>
      publishModelHeartbeat({ changed: skipped !== 'unchanged', skipped });
    if (options.isUserTurnActive?.(agentId)) {
      // Retried at the next sweep, so the check runs as soon as the user's turn is over.
      if (!deferredForUserTurn.has(agentId)) publishSkip('user-turn');
      deferredForUserTurn.add(agentId);
      return 'user-turn';
    }
    deferredForUserTurn.delete(agentId);
    lastModelCheckAt.set(agentId, now);
    if (config.activeHours && !withinActiveHours(now, config.activeHours)) {
      publishSkip('outside-active-hours');
      return 'outside-active-hours';
    }
    const fingerprint = JSON.stringify(items.map((item) => [item.id, item.state, item.updatedAt]));
    if (lastModelFingerprint.get(agentId) === fingerprint) {
      publishSkip('unchanged');
      return 'unchanged';
    }
    lastModelFingerprint.set(agentId, fingerprint);
    const recent = await queue.list({
      agentId,
      states: ['completed', 'failed', 'dead'],
      resolvedSince: last,
      limit: 10,
      order: 'recently-resolved',
    });
    const status = [
      `Work of agent ${agentId}: ${Object.entries(counts)
        .map(([state, count]) => `${count} ${state}`)
        .join(', ')}.`,
      ...concerns.map(
        (concern) =>
          `- ${concern.condition}: "${concern.item.title}" (${concern.item.id}) — ${concern.reason}`,
      ),
      ...recent.map(
        (item) =>
          `- ${item.state} since last check: "${item.title}"${outcomeSummary(item) ? ` — ${outcomeSummary(item)}` : ''}`,
      ),
    ].join('\n');
    const response = await completeModel(options.model, {
      messages: [
        {
          role: 'system',
          content:
            'This is a heartbeat check, not a conversation. Follow the checklist strictly; do not repeat old tasks. ' +
            `If nothing needs the user's attention, reply ${heartbeatOkToken} and nothing else.\n\nChecklist (HEARTBEAT.md):\n${checklist}`,
        },
        { role: 'user', content: status },
      ],
      metadata: { purpose: 'heartbeat', agentId, sessionKey: `heartbeat:${agentId}` },
    });
    if (response.error) {
      logger.warn({ agentId, error: response.error }, 'heartbeat model check failed');
      return 'error';
    }
    const { ok, text } = stripHeartbeatOk(response.text, config.ackMaxChars);
    if (ok || text === '') {
      publishSkip('ok');
      return 'ok';
    }
    publishModelHeartbeat({ changed: true, message: text });
    options.onNudge?.(agentId, text);
    return 'nudge';
  };

  const runSweep = async (): Promise<SweepResult> => {
    const result: SweepResult = { agents: [], blocked: [], stalled: [], proposals: [], modelChecks: [] };
    await queue.reapExpiredLeases();
    const now = clock.now();
    const live = await queue.list({
      states: ['queued', 'claimed', 'running', 'blocked', 'paused'],
      limit: 10_000,
      order: 'oldest',
    });
    const concerns: Concern[] = [];
    for (const item of live) {
      if (item.speculative || systemKinds.has(item.kind)) continue;
      if (item.state === 'blocked') {
        concerns.push({
          item,
          condition: 'blocked',
          reason: item.stateReason ?? 'blocked',
          sinceMs: now - item.updatedAt,
        });
      } else if (
        item.state === 'running' &&
        item.startedAt !== null &&
        now - item.startedAt >= config.stallAfterMs
      ) {
        concerns.push({
          item,
          condition: 'stalled',
          reason: `running for ${formatWait(now - item.startedAt)}`,
          sinceMs: now - item.startedAt,
        });
      } else if (
        item.state === 'queued' &&
        now - Math.max(item.runAfter, item.updatedAt) >= config.stallAfterMs
      ) {
        const since = now - Math.max(item.runAfter, item.updatedAt);
        concerns.push({
          item,
          condition: 'stalled',
          reason: `ready but not started for ${formatWait(since)}`,
          sinceMs: since,
        });
      }
    }
    const currentKeys = new Set<string>();
    for (const concern of concerns) {
      const key = `${concern.item.id}:${concern.condition}:${concern.condition === 'blocked' ? concern.item.updatedAt : concern.item.startedAt}`;
      currentKeys.add(key);
      (concern.condition === 'blocked' ? result.blocked : result.stalled).push(concern.item.id);
      if (reported.has(key)) continue;
      reported.add(key);
      const agentId = agentOf(concern.item);
      const policy = policyFor(agentId);
      const proposals: Array<{ workItemId: string; title: string; rationale: string }> = [];
      for (const [index, proposal] of proposalsFor(concern).entries()) {
        try {
          const submitted = await queue.submit({
            kind: taskKind,
            agentId,
            title: proposal.title,
            description: proposal.description,
            params: { speculativeFor: concern.item.id },
            speculative: true,
            rationale: proposal.rationale,
            paused: !policy.autoRunSpeculative,
            dedupKey: `speculative:${concern.item.id}:${index}`,
            ...(concern.item.sessionKey ? { sessionKey: concern.item.sessionKey } : {}),
            source: 'heartbeat',
          });
          proposals.push({ workItemId: submitted.id, title: proposal.title, rationale: proposal.rationale });
          if (!submitted.merged) result.proposals.push(submitted.id);
        } catch (error) {
          logger.warn({ err: error, workItemId: concern.item.id }, 'could not record a speculative proposal');
        }
      }
      bus.publish(
        'agent:blocked',
        {
          agentId,
          workItemId: concern.item.id,
          title: concern.item.title,
          reason: concern.reason,
          condition: concern.condition,
          sinceMs: concern.sinceMs,
          proposals,
        },
        {
          agentId,
          workItemId: concern.item.id,
          ...(concern.item.sessionKey ? { sessionKey: concern.item.sessionKey } : {}),
        },
      );
    }
    for (const key of reported) if (!currentKeys.has(key)) reported.delete(key);

    const byAgent = new Map<string, WorkItem[]>();
    for (const agentId of options.agents?.() ?? []) byAgent.set(agentId, []);
    for (const item of live) {
      const agentId = agentOf(item);
      const list = byAgent.get(agentId);
      if (list) list.push(item);
      else byAgent.set(agentId, [item]);
    }
    for (const [agentId, items] of byAgent) {
      result.agents.push(agentId);
      const agentConcerns = concerns.filter((concern) => agentOf(concern.item) === agentId);
      const counts = {
        queued: items.filter((item) => item.state === 'queued').length,
        running: items.filter((item) => item.state === 'running' || item.state === 'claimed').length,
        blocked: items.filter((item) => item.state === 'blocked').length,
        stalled: agentConcerns.filter((concern) => concern.condition === 'stalled').length,
        paused: items.filter((item) => item.state === 'paused').length,
      };
      const fingerprint = JSON.stringify(counts);
      const changed = lastFingerprint.get(agentId) !== fingerprint;
      lastFingerprint.set(agentId, fingerprint);
      // Sweeps are frequent: only a change is worth an event.
      if (changed) bus.publish('agent:heartbeat', { agentId, kind: 'sweep', counts, changed }, { agentId });
      try {
        const outcome = await modelCheck(agentId, items, counts, agentConcerns, now);
        if (outcome) result.modelChecks.push({ agentId, outcome });
      } catch (error) {
        logger.warn({ err: error, agentId }, 'heartbeat model check threw');
        result.modelChecks.push({ agentId, outcome: 'error' });
      }
    }
    return result;
  };

  const sweep = (): Promise<SweepResult> => {
    // Overlapping sweeps would report the same concern twice; a slow sweep makes the next one wait.
    sweeping ??= runSweep().finally(() => {
      sweeping = undefined;
    });
    return sweeping;
  };

  return {
    start() {
      if (timer || !config.enabled) return;
      timer = setInterval(() => {
        sweep().catch((error) => logger.error({ err: error }, 'heartbeat sweep failed'));
      }, config.sweepIntervalMs);
      timer.unref?.();
    },
    async stop() {
      if (timer) clearInterval(timer);
      timer = undefined;
      await sweeping?.catch(() => undefined);
    },
    sweep,
  };
}
