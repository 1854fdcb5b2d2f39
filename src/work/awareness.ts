import type { Ledger } from '../ledger/index.js';
import type { SkillLibrary } from '../skills/index.js';
import { clipText } from '../util/index.js';
import { type AwarenessConfig, awarenessConfigSchema, defaultSystemWorkKinds } from './config.js';
import type { WorkQueue } from './queue.js';
import { outcomeSummary } from './rows.js';
import type { WorkItem } from './types.js';

/** What the digest reads of the ledger. */
export type AwarenessLedgerReader = Pick<Ledger, 'read' | 'listRecentFindings'>;

export interface BuildAwarenessDigestOptions {
  /** The item about to run; it is left out of its own digest. */
  workItem: WorkItem;
  queue: WorkQueue;
  ledger?: AwarenessLedgerReader;
  /** Epoch ms; defaults to `Date.now()`. */
  now?: number;
  lookbackMs?: number;
  limits?: Partial<Pick<AwarenessConfig, 'maxRunning' | 'maxRecentCompleted' | 'maxRecentFindings'>>;
  /** Estimated at four characters per token. */
  maxTokens?: number;
  /** Kinds of system work, left out of the digest (default: `defaultSystemWorkKinds`). */
  systemKinds?: ReadonlyArray<string>;
  /** Skills written within the lookback (create_skill, approved proposals): the "Skills updated" section. */
  skills?: Pick<SkillLibrary, 'recentlyUpdated'>;
}

const maxLineChars = 280;

function oneLine(text: string, limit = maxLineChars): string {
  return clipText(text.replace(/\s+/g, ' ').trim(), limit);
}

function ago(ms: number): string {
  if (ms < 60_000) return `${Math.max(0, Math.round(ms / 1000))}s ago`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)}m ago`;
  return `${Math.round(ms / 3_600_000)}h ago`;
}

function label(item: WorkItem): string {
  return `[${item.kind}${item.agentId ? ` @${item.agentId}` : ''}] ${oneLine(item.title, 120)} (${item.id})`;
}

/**
 * The awareness digest: what else is going on, so parallel work stays coherent. Sections: running
 * work with each item's latest plan, blocked work with what it waits for, work completed within the lookback with its summary, recent findings
 * across agents, skills written recently, and this item's own child work (which is how a parent resumed after a restart learns
 * what its children did). Returns '' when there is nothing to report. Bounded by `maxTokens`.
 */
export async function buildAwarenessDigest(options: BuildAwarenessDigestOptions): Promise<string> {
  const defaults = awarenessConfigSchema.parse(undefined);
  const now = options.now ?? Date.now();
  const lookbackMs = options.lookbackMs ?? defaults.lookbackMs;
  const maxRunning = options.limits?.maxRunning ?? defaults.maxRunning;
  const maxCompleted = options.limits?.maxRecentCompleted ?? defaults.maxRecentCompleted;
  const maxFindings = options.limits?.maxRecentFindings ?? defaults.maxRecentFindings;
  const maxChars = (options.maxTokens ?? defaults.maxTokens) * 4;
  const { workItem, queue, ledger } = options;
  const since = now - lookbackMs;
  // System work (memory maintenance) is the runtime's upkeep, not something an agent coordinates with.
  const excludeKinds = options.systemKinds ?? defaultSystemWorkKinds;

  const [running, blocked, completed, children, findings, skillUpdates] = await Promise.all([
    maxRunning > 0
      ? queue.list({ states: ['running'], excludeKinds, limit: maxRunning + 1, order: 'oldest' })
      : Promise.resolve([]),
    maxRunning > 0
      ? queue.list({ states: ['blocked'], excludeKinds, limit: maxRunning + 1, order: 'oldest' })
      : Promise.resolve([]),
    maxCompleted > 0
      ? queue.list({
          states: ['completed'],
          excludeKinds,
          resolvedSince: since,
          limit: maxCompleted + 1,
          order: 'recently-resolved',
        })
      : Promise.resolve([]),
    queue.list({ parentId: workItem.id, limit: 50, order: 'oldest' }),
    ledger && maxFindings > 0
      ? ledger.listRecentFindings({ sinceMs: since, limit: maxFindings + 5 })
      : Promise.resolve([]),
    options.skills ? options.skills.recentlyUpdated({ sinceMs: since, limit: 10 }) : Promise.resolve([]),
  ]);

  const activeLines = await Promise.all(
    running
      .filter((item) => item.id !== workItem.id)
      .slice(0, maxRunning)
      .map(async (item) => {
        const plan = ledger ? (await ledger.read(item.id, { entryType: 'plan', lastN: 1 }))[0] : undefined;
        const since = item.startedAt !== null ? `, started ${ago(now - item.startedAt)}` : '';
        return `- ${label(item)}${since}${plan ? ` — plan: ${oneLine(plan.content, 200)}` : ''}`;
      }),
  );
  const blockedLines = blocked
    .filter((item) => item.id !== workItem.id && item.parentId !== workItem.id)
    .slice(0, maxRunning)
    .map(
      (item) =>
        `- ${label(item)}, ${ago(now - item.updatedAt)}: ${oneLine(item.stateReason ?? 'blocked', 200)}`,
    );
  const completedLines = completed
    .filter((item) => item.id !== workItem.id)
    .slice(0, maxCompleted)
    .map((item) => {
      const summary = outcomeSummary(item);
      return `- ${label(item)}, ${ago(now - (item.resolvedAt ?? now))}${summary ? `: ${oneLine(summary, 200)}` : ''}`;
    });
  const titles = new Map<string, string>(
    [...running, ...blocked, ...completed, ...children].map((item) => [item.id, item.title]),
  );
  const findingLines = findings
    .filter((entry) => entry.workItemId !== workItem.id)
    .slice(0, maxFindings)
    .map((entry) => {
      const source = titles.get(entry.workItemId);
      return `- ${oneLine(entry.content)} (${source ? `${oneLine(source, 60)}, ` : ''}${entry.workItemId})`;
    });
  const childLines = children
    .filter((child) => child.state !== 'merged')
    .map((child) => {
      const summary = outcomeSummary(child);
      const error = child.outcome?.error?.message;
      return `- ${label(child)}: ${child.state}${summary ? ` — ${oneLine(summary, 200)}` : ''}${error ? ` — error: ${oneLine(error, 160)}` : ''}`;
    });

  const skillLines = skillUpdates.map((skill) => {
    const origin = skill.workItems > 1 ? `, from ${skill.workItems} work items` : '';
    return `- ${skill.name} v${skill.version} (${ago(now - skill.updatedAt)}${origin})${skill.description ? `: ${oneLine(skill.description, 160)}` : ''}`;
  });
  const sections: Array<[string, string[]]> = [
    ['Your child work:', childLines],
    ['Currently active:', activeLines],
    ['Blocked (waiting for help):', blockedLines],
    ['Recently completed:', completedLines],
    ['Recent findings:', findingLines],
    ['Skills updated (activate_skill to use one):', skillLines],
  ];
  if (sections.every(([, lines]) => lines.length === 0)) return '';

  const header = '== AWARENESS ==';
  const out: string[] = [header];
  let used = header.length + 1;
  for (const [title, lines] of sections) {
    if (lines.length === 0) continue;
    if (used + title.length + 1 > maxChars) break;
    out.push(title);
    used += title.length + 1;
    let shown = 0;
    for (const line of lines) {
      // Keep room for the "more" marker so a cut is always visible.
      if (used + line.length + 1 > maxChars - 24) break;
      out.push(line);
      used += line.length + 1;
      shown++;
    }
    if (shown < lines.length) {
      const more = `- … ${lines.length - shown} more`;
      out.push(more);
      used += more.length + 1;
    }
  }
  return out.join('\n');
}
