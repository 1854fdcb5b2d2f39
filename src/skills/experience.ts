import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { Bus } from '../bus/index.js';
import type { Ledger, LedgerEntry } from '../ledger/index.js';
import type { SqlDatabase } from '../store/index.js';
import {
  type Clock,
  clipText,
  createIdGenerator,
  ErrorCodes,
  type IdGenerator,
  type Logger,
  silentLogger,
  systemClock,
  UserInputError,
} from '../util/index.js';
import { skillNameProblem } from './frontmatter.js';
import type { SkillLibrary, SkillSummary } from './library.js';

declare module '../bus/events.js' {
  interface BusEventMap {
    /** A recurring pattern in ledger findings became a skill proposal (a draft, or work for an agent). */
    'skill:proposed': {
      proposalId: string;
      name: string;
      mode: 'draft' | 'work';
      workItemId?: string;
      sources: number;
      workItems: number;
    };
  }
}

/** `skills.experience` in agentd.yaml. */
export const skillExperienceConfigSchema = z
  .object({
    /** Look for recurring findings after work completes. */
    enabled: z.boolean().default(true),
    /** Distinct work items whose findings must share a pattern before a skill is proposed. */
    threshold: z.number().int().min(2).default(3),
    /** Keyword overlap (Jaccard, 0–1) at which two findings count as the same pattern. */
    similarity: z.number().gt(0).max(1).default(0.5),
    /** Findings older than this are not looked at. */
    lookbackMs: z
      .number()
      .int()
      .min(60_000)
      .default(30 * 86_400_000),
    /** Most recent findings read per scan. */
    maxFindings: z.number().int().min(10).max(10_000).default(1_000),
    /**
     * Completions arriving faster than this share one scan (the first runs at once, the rest wait for the
     * next slot). A scan of 1,000 findings takes about 20 ms on the event loop.
     */
    scanIntervalMs: z.number().int().min(0).default(10_000),
    /** `draft`: a draft for a person to approve; `work`: a work item asking an agent to write the skill. */
    mode: z.enum(['draft', 'work']).default('draft'),
    /** The agent that gets `work` proposals. */
    agentId: z.string().min(1).default('main'),
  })
  .prefault({});

export type SkillExperienceConfig = z.infer<typeof skillExperienceConfigSchema>;

/** The `skills:` section of agentd.yaml. */
export const skillsConfigSchema = z
  .object({
    experience: skillExperienceConfigSchema,
    /** `skills stale` and `skills.stale` flag skills unused for this many days. */
    staleAfterDays: z.number().int().min(1).default(30),
    /**
     * Days an activation is kept (fractions allowed), beyond each skill's newest, which `staleSkills` reads and
     * is kept however old; 0 keeps every activation.
     */
    retainActivationsDays: z.number().nonnegative().default(30),
  })
  .prefault({});

export type SkillsConfig = z.infer<typeof skillsConfigSchema>;

export const skillProposalStatuses = ['draft', 'submitted', 'approved', 'rejected', 'created'] as const;
export type SkillProposalStatus = (typeof skillProposalStatuses)[number];

export interface SkillProposalSource {
  workItemId: string;
  seq: number;
  content: string;
}

export interface SkillProposal {
  id: string;
  /** The shared keywords that identify the pattern; each pattern is proposed once. */
  patternKey: string;
  skillName: string;
  mode: 'draft' | 'work';
  status: SkillProposalStatus;
  /** The work item that asks an agent to write it (`work` mode). */
  workItemId?: string;
  description: string;
  content: string;
  triggers: string[];
  sources: SkillProposalSource[];
  /** The skill version it became. */
  skillVersion?: number;
  createdAt: number;
  updatedAt: number;
}

export type ProposeWork = (work: {
  kind: string;
  agentId: string;
  title: string;
  description: string;
  params: Record<string, unknown>;
  dedupKey: string;
}) => Promise<{ id: string }>;

export interface SkillExperience {
  readonly config: SkillExperienceConfig;
  /** Looks for recurring patterns now; returns the proposals it made (none when nothing new recurs). */
  scan(): Promise<SkillProposal[]>;
  /**
   * Runs `scan` soon, once, however often it is called meanwhile (after each completed work item): at
   * most one scan per `scanIntervalMs`.
   */
  scheduleScan(): void;
  proposals(filter?: { status?: SkillProposalStatus; limit?: number }): Promise<SkillProposal[]>;
  /** By proposal id, or the latest proposal of a skill name. */
  get(idOrName: string): Promise<SkillProposal | undefined>;
  /** Publishes a draft as a skill, with every source finding as its provenance. */
  approve(id: string): Promise<{ proposal: SkillProposal; skill: SkillSummary }>;
  reject(id: string): Promise<SkillProposal>;
  /** The proposal a `work`-mode work item is writing, so create_skill records its sources. */
  forWorkItem(workItemId: string): Promise<SkillProposal | undefined>;
  /** Called by create_skill when the proposal's work item wrote the skill. */
  markCreated(id: string, version: number): Promise<void>;
  /** Waits for a running scan to finish (tests, shutdown). */
  idle(): Promise<void>;
  /** Cancels a scan waiting for its slot. */
  stop(): void;
}

export interface CreateSkillExperienceOptions {
  db: SqlDatabase;
  ledger: Pick<Ledger, 'listRecentFindings'>;
  library: SkillLibrary;
  config?: Partial<SkillExperienceConfig>;
  /** Submits `work`-mode proposals; without it `work` mode falls back to drafts. */
  proposeWork?: ProposeWork;
  bus?: Bus;
  clock?: Clock;
  idGenerator?: IdGenerator;
  logger?: Logger;
}

const stopwords = new Set(
  (
    'the and for with from into onto about that this these those there here what which when where why how ' +
    'are was were been being have has had does did doing not but its our your their them they you can could ' +
    'should would will shall may might must than then too very just also only each every all any some more ' +
    'most other such own same use used using uses need needs one two per via out off over under again once ' +
    'after before while because found find shows show seems seem get gets got make makes made'
  ).split(' '),
);

/** Crude stemming so "limits", "limited" and "limiting" meet. */
function stem(word: string): string {
  if (word.length > 5 && word.endsWith('ing')) return word.slice(0, -3);
  if (word.length > 4 && word.endsWith('ed')) return word.slice(0, -2);
  if (word.length > 4 && word.endsWith('es') && /(?:ss|sh|ch|x)es$/.test(word)) return word.slice(0, -2);
  if (word.length > 3 && word.endsWith('s') && !word.endsWith('ss')) return word.slice(0, -1);
  return word;
}

/** Stemmed meaningful words, each with the surface form it was written as. */
function terms(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const word of text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) {
    if (word.length < 3 || stopwords.has(word) || /^\d+$/.test(word)) continue;
    const stemmed = stem(word);
    if (!out.has(stemmed)) out.set(stemmed, word);
  }
  return out;
}

function jaccard(left: ReadonlySet<string>, right: ReadonlySet<string>): number {
  let shared = 0;
  for (const term of left) if (right.has(term)) shared++;
  const union = left.size + right.size - shared;
  return union === 0 ? 0 : shared / union;
}

interface Finding {
  entry: LedgerEntry;
  terms: Map<string, string>;
}

interface Cluster {
  seed: Set<string>;
  members: Finding[];
}

/**
 * Groups findings by keyword overlap with each group's first finding (oldest first, so the result does
 * not depend on the order the database returns). An index from term to groups means a finding is only
 * compared with the groups it shares a word with, so unrelated findings cost almost nothing.
 */
function clusterFindings(findings: Finding[], similarity: number): Cluster[] {
  const clusters: Cluster[] = [];
  const byTerm = new Map<string, number[]>();
  for (const finding of findings) {
    const keys = new Set(finding.terms.keys());
    if (keys.size === 0) continue;
    const candidates = new Set<number>();
    for (const term of keys) for (const index of byTerm.get(term) ?? []) candidates.add(index);
    let best: { index: number; score: number } | undefined;
    for (const index of [...candidates].sort((left, right) => left - right)) {
      const score = jaccard(keys, clusters[index]!.seed);
      if (score >= similarity && (!best || score > best.score)) best = { index, score };
    }
    if (best) {
      clusters[best.index]!.members.push(finding);
      continue;
    }
    const index = clusters.push({ seed: keys, members: [finding] }) - 1;
    for (const term of keys) {
      const list = byTerm.get(term);
      if (list) list.push(index);
      else byTerm.set(term, [index]);
    }
  }
  return clusters;
}

/** Terms in at least half of the members, most frequent first: what the findings have in common. */
function sharedTerms(cluster: Cluster): Array<{ stem: string; word: string }> {
  const counts = new Map<string, { count: number; word: string }>();
  for (const member of cluster.members) {
    for (const [stemmed, word] of member.terms) {
      const entry = counts.get(stemmed);
      if (entry) entry.count++;
      else counts.set(stemmed, { count: 1, word });
    }
  }
  const needed = Math.ceil(cluster.members.length / 2);
  // Ties keep the order the first finding wrote them in, so names read like the finding ("vendor-api-rate").
  const position = new Map([...cluster.members[0]!.terms.keys()].map((term, index) => [term, index]));
  const at = (term: string) => position.get(term) ?? Number.MAX_SAFE_INTEGER;
  return [...counts.entries()]
    .filter(([, entry]) => entry.count >= needed)
    .sort(
      (left, right) =>
        right[1].count - left[1].count || at(left[0]) - at(right[0]) || left[0].localeCompare(right[0]),
    )
    .map(([stemmed, entry]) => ({ stem: stemmed, word: entry.word }));
}

function skillNameFor(words: string[], patternKey: string): string {
  const candidate = words
    .slice(0, 3)
    .join('-')
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/-+/g, '-')
    .replace(/^-|-$/g, '')
    .slice(0, 48);
  if (candidate && !skillNameProblem(candidate)) return candidate;
  return `pattern-${createHash('sha256').update(patternKey).digest('hex').slice(0, 8)}`;
}

const oneLine = (text: string, limit: number) => {
  return clipText(text.replace(/\s+/g, ' ').trim(), limit);
};

interface ProposalRow {
  id: string;
  pattern_key: string;
  skill_name: string;
  mode: 'draft' | 'work';
  status: SkillProposalStatus;
  work_item_id: string | null;
  description: string;
  content: string;
  triggers: string;
  sources: string;
  skill_version: number | null;
  created_at: number;
  updated_at: number;
}

function toProposal(row: ProposalRow): SkillProposal {
  return {
    id: row.id,
    patternKey: row.pattern_key,
    skillName: row.skill_name,
    mode: row.mode,
    status: row.status,
    ...(row.work_item_id !== null ? { workItemId: row.work_item_id } : {}),
    description: row.description,
    content: row.content,
    triggers: JSON.parse(row.triggers) as string[],
    sources: JSON.parse(row.sources) as SkillProposalSource[],
    ...(row.skill_version !== null ? { skillVersion: Number(row.skill_version) } : {}),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
}

/**
 * Skills from experience: findings that recur across work items — the same keywords in the
 * findings of at least `threshold` different items — become a skill proposal, made once per pattern: a
 * draft a person approves (`skills approve`), or a work item asking an agent to write the skill with
 * create_skill. Either way the skill's provenance lists every finding it came from.
 */
export function createSkillExperience(options: CreateSkillExperienceOptions): SkillExperience {
  const { db, ledger, library, bus } = options;
  const config = skillExperienceConfigSchema.parse(options.config ?? {});
  const clock = options.clock ?? systemClock;
  const ids = options.idGenerator ?? createIdGenerator();
  const logger = (options.logger ?? silentLogger).child({ component: 'skill-experience' });
  let scanning: Promise<SkillProposal[]> | undefined;
  let rescan = false;

  const byId = async (id: string) => {
    const row = await db.get<ProposalRow>('SELECT * FROM skill_proposals WHERE id = ?', [id]);
    return row ? toProposal(row) : undefined;
  };

  const requireProposal = async (id: string) => {
    const proposal = await byId(id);
    if (!proposal)
      throw new UserInputError({ code: ErrorCodes.notFound, message: `no skill proposal ${id}.` });
    return proposal;
  };

  const setStatus = async (id: string, status: SkillProposalStatus, version?: number) => {
    await db.run('UPDATE skill_proposals SET status = ?, skill_version = ?, updated_at = ? WHERE id = ?', [
      status,
      version ?? null,
      clock.now(),
      id,
    ]);
  };

  const propose = async (cluster: Cluster): Promise<SkillProposal | undefined> => {
    const shared = sharedTerms(cluster);
    const patternKey = shared
      .slice(0, 5)
      .map((term) => term.stem)
      .sort()
      .join('+');
    if (!patternKey) return undefined;
    const existing = await db.get<{ id: string }>('SELECT id FROM skill_proposals WHERE pattern_key = ?', [
      patternKey,
    ]);
    if (existing) return undefined;
    const words = shared.map((term) => term.word);
    const skillName = skillNameFor(words, patternKey);
    const members = [...cluster.members].sort(
      (left, right) =>
        left.entry.createdAt - right.entry.createdAt ||
        left.entry.workItemId.localeCompare(right.entry.workItemId),
    );
    const sources = members.map((member) => ({
      workItemId: member.entry.workItemId,
      seq: member.entry.seq,
      content: member.entry.content.slice(0, 500),
    }));
    const workItems = new Set(sources.map((source) => source.workItemId)).size;
    const triggers = words.slice(0, 5);
    const description = oneLine(
      `What ${workItems} work items found about ${words.slice(0, 3).join(', ')}: ${members[0]!.entry.content}`,
      1024,
    );
    const content = [
      `# ${words
        .slice(0, 3)
        .join(' ')
        .replace(/^./, (first) => first.toUpperCase())}`,
      '',
      `The same finding came up in ${workItems} separate work items:`,
      '',
      ...members.slice(0, 20).map((member) => `- ${oneLine(member.entry.content, 400)}`),
      '',
      `When a task involves ${words.slice(0, 5).join(', ')}, take these findings into account from the ` +
        'start, and check whether they still hold before relying on them.',
    ].join('\n');
    const now = clock.now();
    const id = ids('skp');
    let mode = config.mode;
    let workItemId: string | undefined;
    if (mode === 'work' && options.proposeWork) {
      const submitted = await options.proposeWork({
        kind: 'task',
        agentId: config.agentId,
        title: `Write a skill: ${skillName}`,
        description:
          `These findings recur across ${workItems} work items. Write a reusable skill from them with ` +
          `create_skill (suggested name "${skillName}", triggers ${JSON.stringify(triggers)}): state the ` +
          'pattern, when it applies and what to do about it.\n\n' +
          sources.map((source) => `- ${oneLine(source.content, 400)} (${source.workItemId})`).join('\n'),
        params: { skillProposalId: id },
        dedupKey: `skill-proposal:${patternKey}`,
      });
      workItemId = submitted.id;
    } else mode = 'draft';
    const row: ProposalRow = {
      id,
      pattern_key: patternKey,
      skill_name: skillName,
      mode,
      status: mode === 'work' ? 'submitted' : 'draft',
      work_item_id: workItemId ?? null,
      description,
      content,
      triggers: JSON.stringify(triggers),
      sources: JSON.stringify(sources),
      skill_version: null,
      created_at: now,
      updated_at: now,
    };
    // Another process may have proposed the same pattern meanwhile: the unique key keeps one.
    const inserted = await db.run(
      `INSERT INTO skill_proposals (id, pattern_key, skill_name, mode, status, work_item_id, description, content,
         triggers, sources, skill_version, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (pattern_key) DO NOTHING`,
      [
        row.id,
        row.pattern_key,
        row.skill_name,
        row.mode,
        row.status,
        row.work_item_id,
        row.description,
        row.content,
        row.triggers,
        row.sources,
        row.skill_version,
        row.created_at,
        row.updated_at,
      ],
    );
    if (inserted.changes === 0) return undefined;
    bus?.publish(
      'skill:proposed',
      {
        proposalId: id,
        name: skillName,
        mode,
        ...(workItemId ? { workItemId } : {}),
        sources: sources.length,
        workItems,
      },
      workItemId ? { workItemId } : {},
    );
    return toProposal(row);
  };

  const runScan = async (): Promise<SkillProposal[]> => {
    const recent = await ledger.listRecentFindings({
      sinceMs: clock.now() - config.lookbackMs,
      limit: config.maxFindings,
    });
    const findings = recent
      .map((entry) => ({ entry, terms: terms(entry.content) }))
      .sort(
        (left, right) =>
          left.entry.createdAt - right.entry.createdAt ||
          left.entry.workItemId.localeCompare(right.entry.workItemId) ||
          left.entry.seq - right.entry.seq,
      );
    const made: SkillProposal[] = [];
    for (const cluster of clusterFindings(findings, config.similarity)) {
      const workItems = new Set(cluster.members.map((member) => member.entry.workItemId));
      if (workItems.size < config.threshold) continue;
      const proposal = await propose(cluster);
      if (proposal) made.push(proposal);
    }
    return made;
  };

  const scan = (): Promise<SkillProposal[]> => {
    if (scanning) {
      rescan = true;
      return scanning;
    }
    scanning = runScan().finally(() => {
      scanning = undefined;
      if (rescan) {
        rescan = false;
        scheduleScan();
      }
    });
    return scanning;
  };

  let lastScanAt = Number.NEGATIVE_INFINITY;
  let pending: NodeJS.Timeout | undefined;
  const scanNow = () => {
    lastScanAt = clock.now();
    scan().catch((error: unknown) => logger.warn({ err: error }, 'skill pattern scan failed'));
  };
  const scheduleScan = () => {
    if (!config.enabled || pending) return;
    const wait = lastScanAt + config.scanIntervalMs - clock.now();
    if (wait <= 0) {
      scanNow();
      return;
    }
    pending = setTimeout(() => {
      pending = undefined;
      scanNow();
    }, wait);
    pending.unref?.();
  };

  return {
    config,
    scan,
    scheduleScan,
    async proposals(filter = {}) {
      const limit = Math.min(Math.max(filter.limit ?? 100, 1), 1_000);
      const rows = filter.status
        ? await db.all<ProposalRow>(
            'SELECT * FROM skill_proposals WHERE status = ? ORDER BY created_at DESC, id DESC LIMIT ?',
            [filter.status, limit],
          )
        : await db.all<ProposalRow>(
            'SELECT * FROM skill_proposals ORDER BY created_at DESC, id DESC LIMIT ?',
            [limit],
          );
      return rows.map(toProposal);
    },
    async get(idOrName) {
      const direct = await byId(idOrName);
      if (direct) return direct;
      const row = await db.get<ProposalRow>(
        'SELECT * FROM skill_proposals WHERE skill_name = ? ORDER BY created_at DESC, id DESC LIMIT 1',
        [idOrName],
      );
      return row ? toProposal(row) : undefined;
    },
    async approve(id) {
      const proposal = await requireProposal(id);
      if (proposal.status !== 'draft') {
        throw new UserInputError({
          code: ErrorCodes.conflict,
          message: `skill proposal ${id} is ${proposal.status}; only drafts can be approved.`,
        });
      }
      const skill = await library.create(
        {
          name: proposal.skillName,
          description: proposal.description,
          content: proposal.content,
          triggers: proposal.triggers,
        },
        {
          sources: proposal.sources.map(({ workItemId, seq }) => ({ workItemId, seq })),
          createdFrom: `pattern:${proposal.patternKey}`,
        },
        {
          // Approved in the skill's own commit: a refused write leaves a draft and no skill, and an
          // approval that lost a race to another leaves no second version.
          also: async (tx, version) => {
            const approved = await tx.run(
              "UPDATE skill_proposals SET status = 'approved', skill_version = ?, updated_at = ? WHERE id = ? AND status = 'draft'",
              [version, clock.now(), id],
            );
            if (approved.changes === 0)
              throw new UserInputError({
                code: ErrorCodes.conflict,
                message: `skill proposal ${id} is no longer a draft; only drafts can be approved.`,
              });
          },
        },
      );
      return { proposal: (await byId(id))!, skill };
    },
    async reject(id) {
      const proposal = await requireProposal(id);
      if (proposal.status !== 'draft' && proposal.status !== 'submitted') {
        throw new UserInputError({
          code: ErrorCodes.conflict,
          message: `skill proposal ${id} is ${proposal.status}; it cannot be rejected.`,
        });
      }
      await setStatus(id, 'rejected');
      return (await byId(id))!;
    },
    async forWorkItem(workItemId) {
      const row = await db.get<ProposalRow>(
        "SELECT * FROM skill_proposals WHERE work_item_id = ? AND status = 'submitted' LIMIT 1",
        [workItemId],
      );
      return row ? toProposal(row) : undefined;
    },
    markCreated: (id, version) => setStatus(id, 'created', version),
    async idle() {
      while (scanning) await scanning.catch(() => undefined);
    },
    stop() {
      if (pending) clearTimeout(pending);
      pending = undefined;
    },
  };
}
