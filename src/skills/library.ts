import { mkdir, readdir, rmdir, stat, unlink } from 'node:fs/promises';
import path from 'node:path';
import type { Bus } from '../bus/index.js';
import type { Ledger } from '../ledger/index.js';
import { estimateTokens } from '../model/index.js';
import type { SqlDatabase, SqlExecutor } from '../store/index.js';
import {
  asFileNotWritten,
  type Clock,
  ErrorCodes,
  execLiteral,
  type Logger,
  silentLogger,
  systemClock,
  UserInputError,
  writeFileAtomically,
  yamlParser,
} from '../util/index.js';
import { parseSkillFile, type SkillFrontmatter, skillNameProblem } from './frontmatter.js';
import { createFrontmatterCache } from './frontmatter-cache.js';
import { maxSkillFileBytes, readSkillFile } from './skill-file.js';

declare module '../bus/events.js' {
  interface BusEventMap {
    'skill:activated': {
      name: string;
      version: number;
      activationType: 'manual' | 'auto';
      runId?: string;
      workItemId?: string;
    };
    'skill:created': { name: string; version: number; workItemId?: string };
    /** A SKILL.md could not be loaded; discovery skipped it. */
    'skill:invalid': { path: string; reason: string };
  }
}

export interface SkillSummary {
  name: string;
  description: string;
  version: number;
  /** The skill's folder. */
  dir: string;
  file: string;
  keywords: string[];
  /** True when trigger keywords may activate it without the model asking. */
  autoActivate: boolean;
  allowedTools?: string[];
  createdBy?: string;
  createdFrom?: string;
  frontmatter: SkillFrontmatter;
}

export interface SkillProblem {
  path: string;
  reason: string;
}

export interface ActivatedSkill {
  name: string;
  version: number;
  /** The SKILL.md body with `{baseDir}` replaced by the skill's folder. */
  body: string;
  estimatedTokens: number;
}

export interface ActivationContext {
  runId?: string;
  workItemId?: string;
  agentId?: string;
}

export interface SkillProvenanceRecord {
  skillName: string;
  skillVersion: number;
  sourceType: 'work_item' | 'ledger_entry';
  workItemId?: string;
  ledgerSeq?: number;
  contentSnippet?: string;
  createdAt: number;
}

export interface StaleSkill {
  name: string;
  /** Last activation, if it was ever activated. */
  lastActivatedAt?: number;
  /** Last activation or (re)creation, else the SKILL.md modification time. */
  lastUsedAt: number;
}

export interface SkillLibrary {
  /** Re-reads every skill folder. Malformed skills are reported in `problems` and skipped. */
  refresh(): Promise<{ skills: SkillSummary[]; problems: SkillProblem[] }>;
  list(): Promise<SkillSummary[]>;
  problems(): Promise<SkillProblem[]>;
  get(name: string): Promise<SkillSummary | undefined>;
  /** Tier 1 of progressive disclosure: names and descriptions, for the system prompt. Empty when no skills. */
  catalog(options?: { maxChars?: number }): Promise<string>;
  /** Skills whose name, description or keywords match the words of `query`, best first. */
  search(query: string, options?: { limit?: number }): Promise<SkillSummary[]>;
  /** Tier 2: loads the body from disk and records the activation. */
  activate(
    name: string,
    context?: ActivationContext & { activationType?: 'manual' | 'auto' },
  ): Promise<ActivatedSkill>;
  /** Activates skills whose trigger keywords occur in `text`, most hits first, within the count and token caps. */
  autoActivate(
    text: string,
    context?: ActivationContext & { maxSkills?: number; maxTokens?: number; exclude?: Iterable<string> },
  ): Promise<ActivatedSkill[]>;
  /** Writes (or updates, bumping the version) a skill in the writable folder and records its provenance. */
  create(
    input: { name: string; description: string; content: string; triggers?: string[] },
    provenance: SkillCreationProvenance,
    options?: {
      /** Commits with the skill's provenance (a proposal's approval), before its file is published. */
      also?: (tx: SqlExecutor, version: number) => Promise<void>;
    },
  ): Promise<SkillSummary>;
  provenance(name: string): Promise<SkillProvenanceRecord[]>;
  /** Skills not used for `olderThanDays`: flagged for a human, never deleted. */
  staleSkills(options?: { olderThanDays?: number }): Promise<StaleSkill[]>;
  /** Skill versions written (by create_skill or an approved proposal) since `sinceMs`, newest first. */
  recentlyUpdated(options: { sinceMs: number; limit?: number }): Promise<SkillUpdate[]>;
}

/** Where a new skill version came from. */
export interface SkillCreationProvenance {
  /** The work item that wrote it (create_skill). */
  workItemId?: string;
  /** Ledger entries of `workItemId` it is based on. */
  ledgerEntrySeqs?: number[];
  /** Ledger entries of any work items (a pattern found across items): one provenance row each. */
  sources?: ReadonlyArray<{ workItemId: string; seq: number }>;
  /** `created_from` in the frontmatter; defaults to `work_item:<workItemId>`. */
  createdFrom?: string;
}

export interface SkillUpdate {
  name: string;
  version: number;
  description?: string;
  updatedAt: number;
  /** Distinct work items in its provenance. */
  workItems: number;
}

export interface CreateSkillLibraryOptions {
  /** Skill folders in precedence order (the first with a name wins), e.g. `[<workspace>/skills, <state>/skills]`. */
  dirs: string[];
  db: SqlDatabase;
  /** Where `create` writes; `dirs[0]` by default. */
  writableDir?: string;
  /** Used to copy ledger entry text into provenance records. */
  ledger?: Ledger;
  bus?: Bus;
  clock?: Clock;
  logger?: Logger;
}

const escapeXml = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** The catalog the system prompt carries: names and descriptions, within `maxChars`. */
function catalogOf(skills: ReadonlyArray<SkillSummary>, maxChars: number): string {
  if (skills.length === 0) return '';
  const header =
    'Skills you can load with activate_skill {name} when a task matches their description:\n<available_skills>';
  const footer = '</available_skills>';
  const lines: string[] = [];
  // The header, the footer and the line break between them; each line adds itself and one break.
  let used = header.length + 1 + footer.length;
  if (used > maxChars) return '';
  const fits = (line: string) => used + line.length + 1 <= maxChars;
  for (const skill of skills) {
    let line = `<skill name="${skill.name}">${escapeXml(skill.description)}</skill>`;
    // Degrade gracefully under the budget: shortened description first, then the name alone.
    if (!fits(line))
      line = `<skill name="${skill.name}">${escapeXml(skill.description.slice(0, 80))}…</skill>`;
    if (!fits(line)) line = `<skill name="${skill.name}"/>`;
    if (!fits(line)) break;
    lines.push(line);
    used += line.length + 1;
  }
  return [header, ...lines, footer].join('\n');
}

/** A keyword as a whole word or phrase. */
const keywordAround = (escaped: string) => `(^|[^\\p{L}\\p{N}])${escaped}($|[^\\p{L}\\p{N}])`;

/** `text` is already lower case. */
function keywordMatches(text: string, keyword: string): boolean {
  return execLiteral(keywordAround, keyword.toLowerCase(), text, 'u') !== null;
}

/**
 * Skill folders read per directory, in name order: an agent can make folders, and every discovery (at start
 * too, decision 0034) reads each one's SKILL.md.
 */
const maxSkillFoldersPerDir = 1_000;

export function createSkillLibrary(options: CreateSkillLibraryOptions): SkillLibrary {
  const { db, bus, ledger } = options;
  const clock = options.clock ?? systemClock;
  const logger = options.logger ?? silentLogger;
  const writableDir = options.writableDir ?? options.dirs[0];
  let state: Promise<{ skills: Map<string, SkillSummary>; problems: SkillProblem[] }> | undefined;
  /** Every run's system prompt carries the catalog: made once per discovery, not once per run. */
  let catalogMade: { of: object; maxChars: number; text: string } | undefined;
  /**
   * The skills trigger keywords may activate, listed once per discovery: every run asks, and a library with
   * none (or a message that names none of their keywords) answers without a list made for it.
   */
  let autoSkillsMade: { of: object; skills: SkillSummary[] } | undefined;
  const keptFrontmatter = createFrontmatterCache({ db, clock, logger });
  const parse = (text: string) => parseSkillFile(text, keptFrontmatter.read);

  const discover = async () => {
    await keptFrontmatter.load();
    const skills = new Map<string, SkillSummary>();
    const problems: SkillProblem[] = [];
    const report = (file: string, reason: string) => {
      problems.push({ path: file, reason });
      logger.warn({ path: file, reason }, 'skipping malformed skill');
      bus?.publish('skill:invalid', { path: file, reason });
    };
    for (const dir of options.dirs) {
      let entries: import('node:fs').Dirent[];
      try {
        entries = await readdir(dir, { withFileTypes: true });
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT')
          report(dir, `cannot read folder: ${(error as Error).message}`);
        continue;
      }
      const folders = entries
        .filter((entry) => entry.isDirectory())
        .sort((left, right) => left.name.localeCompare(right.name));
      if (folders.length > maxSkillFoldersPerDir)
        report(
          dir,
          `${folders.length} folders; only the first ${maxSkillFoldersPerDir} by name are read as skills`,
        );
      for (const entry of folders.slice(0, maxSkillFoldersPerDir)) {
        const folder = path.join(dir, entry.name);
        const file = path.join(folder, 'SKILL.md');
        let read: Awaited<ReturnType<typeof readSkillFile>>;
        try {
          read = await readSkillFile(file);
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'ENOENT')
            report(file, `cannot read: ${(error as Error).message}`);
          continue;
        }
        if ('problem' in read) {
          report(file, `cannot read: ${read.problem}`);
          continue;
        }
        const parsed = parse(read.text);
        if (!parsed.ok) {
          report(file, parsed.reason);
          continue;
        }
        const { frontmatter } = parsed;
        if (frontmatter.name !== entry.name) {
          report(file, `name "${frontmatter.name}" does not match its folder "${entry.name}"`);
          continue;
        }
        if (skills.has(frontmatter.name)) {
          logger.info(
            { name: frontmatter.name, shadowed: file },
            'skill shadowed by one in a higher-precedence folder',
          );
          continue;
        }
        const keywords = frontmatter.triggers?.keywords ?? [];
        skills.set(frontmatter.name, {
          name: frontmatter.name,
          description: frontmatter.description,
          version: frontmatter.version,
          dir: folder,
          file,
          keywords,
          autoActivate: frontmatter.auto_activate ?? keywords.length > 0,
          ...(frontmatter['allowed-tools'] ? { allowedTools: frontmatter['allowed-tools'] } : {}),
          ...(frontmatter.created_by ? { createdBy: frontmatter.created_by } : {}),
          ...(frontmatter.created_from ? { createdFrom: frontmatter.created_from } : {}),
          frontmatter,
        });
      }
    }
    await keptFrontmatter.save();
    return { skills, problems };
  };

  const current = () => {
    state ??= discover();
    return state;
  };

  const requireSkill = async (name: string) => {
    const skill = (await current()).skills.get(name);
    if (!skill) {
      const known = [...(await current()).skills.keys()];
      throw new UserInputError({
        code: ErrorCodes.notFound,
        message: `No skill named "${name}". Known skills: ${known.join(', ') || '(none)'}.`,
      });
    }
    return skill;
  };

  const loadBody = async (skill: SkillSummary) => {
    const read = await readSkillFile(skill.file);
    const parsed = 'problem' in read ? { ok: false as const, reason: read.problem } : parse(read.text);
    if (!parsed.ok) {
      throw new UserInputError({
        code: ErrorCodes.invalidRequest,
        message: `Skill ${skill.name} became malformed: ${parsed.reason}`,
      });
    }
    return { body: parsed.body.replaceAll('{baseDir}', skill.dir), version: parsed.frontmatter.version };
  };

  const activate: SkillLibrary['activate'] = async (name, context = {}) => {
    const skill = await requireSkill(name);
    const { body, version } = await loadBody(skill);
    const activationType = context.activationType ?? 'manual';
    await db.run(
      `INSERT INTO skill_activations (skill_name, skill_version, activation_type, work_item_id, run_id, agent_id, activated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?)`,
      [
        name,
        version,
        activationType,
        context.workItemId ?? null,
        context.runId ?? null,
        context.agentId ?? null,
        clock.now(),
      ],
    );
    bus?.publish(
      'skill:activated',
      {
        name,
        version,
        activationType,
        ...(context.runId ? { runId: context.runId } : {}),
        ...(context.workItemId ? { workItemId: context.workItemId } : {}),
      },
      { runId: context.runId, workItemId: context.workItemId, agentId: context.agentId },
    );
    return { name, version, body, estimatedTokens: estimateTokens(body) };
  };

  return {
    async refresh() {
      state = discover();
      const { skills, problems } = await state;
      return { skills: [...skills.values()], problems };
    },
    list: async () => [...(await current()).skills.values()],
    problems: async () => (await current()).problems,
    get: async (name) => (await current()).skills.get(name),

    async catalog(catalogOptions = {}) {
      const discovered = await current();
      const maxChars = catalogOptions.maxChars ?? 8000;
      if (catalogMade?.of === discovered && catalogMade.maxChars === maxChars) return catalogMade.text;
      const text = catalogOf([...discovered.skills.values()], maxChars);
      catalogMade = { of: discovered, maxChars, text };
      return text;
    },

    async search(query, searchOptions = {}) {
      const words = query
        .toLowerCase()
        .split(/[^\p{L}\p{N}-]+/u)
        .filter((word) => word.length > 1);
      const skills = [...(await current()).skills.values()];
      if (words.length === 0) return skills.slice(0, searchOptions.limit ?? 20);
      const scored = skills
        .map((skill) => {
          let score = 0;
          for (const word of words) {
            if (skill.name.includes(word)) score += 3;
            if (skill.keywords.some((keyword) => keyword.toLowerCase().includes(word))) score += 2;
            if (skill.description.toLowerCase().includes(word)) score += 1;
          }
          return { skill, score };
        })
        .filter((entry) => entry.score > 0)
        .sort((left, right) => right.score - left.score || left.skill.name.localeCompare(right.skill.name));
      return scored.slice(0, searchOptions.limit ?? 20).map((entry) => entry.skill);
    },

    activate,

    async autoActivate(text, context = {}) {
      const discovered = await current();
      if (autoSkillsMade?.of !== discovered) {
        const skills = [...discovered.skills.values()].filter(
          (skill) => skill.autoActivate && skill.keywords.length > 0,
        );
        autoSkillsMade = { of: discovered, skills };
      }
      if (autoSkillsMade.skills.length === 0) return [];
      const lower = text.toLowerCase();
      const excluded = new Set(context.exclude ?? []);
      const maxSkills = context.maxSkills ?? 5;
      let remainingTokens = context.maxTokens ?? 4000;
      const candidates = autoSkillsMade.skills
        .filter((skill) => !excluded.has(skill.name))
        .map((skill) => ({
          skill,
          hits: skill.keywords.filter((keyword) => keywordMatches(lower, keyword)).length,
        }))
        .filter((entry) => entry.hits > 0)
        .sort((left, right) => right.hits - left.hits || left.skill.name.localeCompare(right.skill.name));
      const activated: ActivatedSkill[] = [];
      for (const { skill } of candidates) {
        if (activated.length === maxSkills) break;
        // Check the size before recording an activation, so a skipped skill leaves no trace.
        const { body } = await loadBody(skill);
        if (estimateTokens(body) > remainingTokens) {
          logger.info(
            { name: skill.name, remainingTokens },
            'auto-activation skipped: skill exceeds the token cap',
          );
          continue;
        }
        const result = await activate(skill.name, { ...context, activationType: 'auto' });
        remainingTokens -= result.estimatedTokens;
        activated.push(result);
      }
      return activated;
    },

    async create(input, provenance, options = {}) {
      if (!writableDir)
        throw new UserInputError({
          code: ErrorCodes.invalidConfig,
          message: 'No writable skills folder is configured.',
        });
      const nameProblem = skillNameProblem(input.name);
      if (nameProblem)
        throw new UserInputError({
          code: ErrorCodes.invalidRequest,
          message: `Invalid skill name "${input.name}": ${nameProblem}.`,
        });
      if (input.description.trim() === '' || input.description.length > 1024) {
        throw new UserInputError({
          code: ErrorCodes.invalidRequest,
          message: 'A skill description must be 1–1024 characters.',
        });
      }
      if (input.content.trim() === '')
        throw new UserInputError({ code: ErrorCodes.invalidRequest, message: 'A skill needs content.' });
      const existing = (await current()).skills.get(input.name);
      const folder = path.join(writableDir, input.name);
      if (existing && path.resolve(existing.dir) !== path.resolve(folder)) {
        throw new UserInputError({
          code: ErrorCodes.conflict,
          message: `Skill "${input.name}" is provided by ${existing.dir}, which agents cannot change; choose another name.`,
        });
      }
      // An existing folder with a malformed SKILL.md still counts: its version must not be reused.
      const skillFile = path.join(folder, 'SKILL.md');
      const previous = await readSkillFile(skillFile).then(
        (read) => ('problem' in read ? undefined : read.text),
        () => undefined,
      );
      const onDisk = previous === undefined ? undefined : parseSkillFile(previous);
      const version = Math.max(existing?.version ?? 0, onDisk?.ok ? onDisk.frontmatter.version : 0) + 1;
      const now = clock.now();
      const frontmatter: Record<string, unknown> = {
        name: input.name,
        description: input.description.trim(),
        version,
        ...(input.triggers?.length ? { triggers: { keywords: input.triggers }, auto_activate: true } : {}),
        created_by: 'agent',
        ...(provenance.createdFrom
          ? { created_from: provenance.createdFrom }
          : provenance.workItemId
            ? { created_from: `work_item:${provenance.workItemId}` }
            : {}),
        updated_at: new Date(now).toISOString(),
      };
      const text = `---\n${yamlParser().stringify(frontmatter).trimEnd()}\n---\n\n${input.content.trim()}\n`;
      const bytes = Buffer.byteLength(text, 'utf8');
      if (bytes > maxSkillFileBytes)
        throw new UserInputError({
          code: ErrorCodes.payloadTooLarge,
          message: `The skill would be ${bytes} bytes; a SKILL.md may have at most ${maxSkillFileBytes}.`,
        });
      const check = parseSkillFile(text);
      if (!check.ok)
        throw new UserInputError({
          code: ErrorCodes.invalidRequest,
          message: `The skill would be malformed: ${check.reason}`,
        });

      // Every ledger entry the skill is based on, from this work item or (a recurring pattern) from many.
      const sources = [
        ...[...new Set(provenance.ledgerEntrySeqs ?? [])].flatMap((seq) =>
          provenance.workItemId ? [{ workItemId: provenance.workItemId, seq }] : [],
        ),
        ...(provenance.sources ?? []),
      ];
      const snippets = new Map<string, string>();
      if (ledger) {
        for (const workItemId of new Set(sources.map((source) => source.workItemId))) {
          const wanted = new Set(sources.filter((s) => s.workItemId === workItemId).map((s) => s.seq));
          for (const entry of await ledger.read(workItemId))
            if (wanted.has(entry.seq))
              snippets.set(`${workItemId}:${entry.seq}`, entry.content.slice(0, 500));
        }
      }
      const workItems = [
        ...new Set([
          ...(provenance.workItemId ? [provenance.workItemId] : []),
          ...sources.map((source) => source.workItemId),
        ]),
      ];
      const recordProvenance = async (tx: SqlExecutor) => {
        const insert = `INSERT INTO skill_provenance (skill_name, skill_version, source_type, work_item_id, ledger_seq, content_snippet, created_at)
          VALUES (?, ?, ?, ?, ?, ?, ?)`;
        if (workItems.length === 0)
          await tx.run(insert, [input.name, version, 'work_item', null, null, null, now]);
        for (const workItemId of workItems)
          await tx.run(insert, [input.name, version, 'work_item', workItemId, null, null, now]);
        for (const source of sources) {
          await tx.run(insert, [
            input.name,
            version,
            'ledger_entry',
            source.workItemId,
            source.seq,
            snippets.get(`${source.workItemId}:${source.seq}`) ?? null,
            now,
          ]);
        }
      };
      const shown = `${input.name}/SKILL.md`;
      const createdFolder = await mkdir(folder, { recursive: true }).catch((error: unknown) => {
        throw asFileNotWritten(error, shown);
      });
      let published = false;
      // The file is published last inside the provenance's transaction: a file the disk refuses leaves no
      // row, and a refused commit puts the file back as it was. Skill and record appear together or not at all.
      try {
        await db.transaction(async (tx) => {
          await recordProvenance(tx);
          await options.also?.(tx, version);
          await writeFileAtomically(skillFile, text, { shown });
          published = true;
        });
      } catch (error) {
        const putBack = async () => {
          if (published && previous !== undefined) await writeFileAtomically(skillFile, previous, { shown });
          else if (published) await unlink(skillFile);
          if (createdFolder !== undefined) await rmdir(folder);
        };
        await putBack().catch((undoError: unknown) =>
          logger.error(
            { err: undoError, skill: input.name },
            'a skill whose record the database refused is still on disk',
          ),
        );
        throw error;
      }
      state = discover();
      bus?.publish(
        'skill:created',
        {
          name: input.name,
          version,
          ...(provenance.workItemId ? { workItemId: provenance.workItemId } : {}),
        },
        {
          workItemId: provenance.workItemId,
        },
      );
      const created = (await state).skills.get(input.name);
      if (!created)
        throw new UserInputError({
          code: ErrorCodes.conflict,
          message: `Skill "${input.name}" was written but is shadowed by another folder.`,
        });
      return created;
    },

    async provenance(name) {
      const rows = await db.all<{
        skill_name: string;
        skill_version: number;
        source_type: 'work_item' | 'ledger_entry';
        work_item_id: string | null;
        ledger_seq: number | null;
        content_snippet: string | null;
        created_at: number;
      }>(
        `SELECT skill_name, skill_version, source_type, work_item_id, ledger_seq, content_snippet, created_at
         FROM skill_provenance WHERE skill_name = ? ORDER BY skill_version, id`,
        [name],
      );
      return rows.map((row) => ({
        skillName: row.skill_name,
        skillVersion: Number(row.skill_version),
        sourceType: row.source_type,
        ...(row.work_item_id !== null ? { workItemId: row.work_item_id } : {}),
        ...(row.ledger_seq !== null ? { ledgerSeq: Number(row.ledger_seq) } : {}),
        ...(row.content_snippet !== null ? { contentSnippet: row.content_snippet } : {}),
        createdAt: Number(row.created_at),
      }));
    },

    async recentlyUpdated({ sinceMs, limit = 20 }) {
      const rows = await db.all<{ skill_name: string; skill_version: number; at: number; items: number }>(
        `SELECT skill_name, skill_version, MAX(created_at) AS at, COUNT(DISTINCT work_item_id) AS items
         FROM skill_provenance WHERE created_at >= ? GROUP BY skill_name, skill_version
         ORDER BY at DESC, skill_name LIMIT ?`,
        [sinceMs, Math.min(Math.max(limit, 1), 500)],
      );
      const skills = (await current()).skills;
      return rows.map((row) => {
        const description = skills.get(row.skill_name)?.description;
        return {
          name: row.skill_name,
          version: Number(row.skill_version),
          ...(description !== undefined ? { description } : {}),
          updatedAt: Number(row.at),
          workItems: Number(row.items),
        };
      });
    },

    async staleSkills(staleOptions = {}) {
      const cutoff = clock.now() - (staleOptions.olderThanDays ?? 30) * 86_400_000;
      const activations = new Map(
        (
          await db.all<{ skill_name: string; last_at: number }>(
            'SELECT skill_name, MAX(activated_at) AS last_at FROM skill_activations GROUP BY skill_name',
          )
        ).map((row) => [row.skill_name, Number(row.last_at)]),
      );
      const creations = new Map(
        (
          await db.all<{ skill_name: string; last_at: number }>(
            'SELECT skill_name, MAX(created_at) AS last_at FROM skill_provenance GROUP BY skill_name',
          )
        ).map((row) => [row.skill_name, Number(row.last_at)]),
      );
      const stale: StaleSkill[] = [];
      for (const skill of (await current()).skills.values()) {
        const lastActivatedAt = activations.get(skill.name);
        const known = [lastActivatedAt, creations.get(skill.name)].filter(
          (value): value is number => value !== undefined,
        );
        const lastUsedAt = known.length ? Math.max(...known) : (await stat(skill.file)).mtimeMs;
        if (lastUsedAt < cutoff)
          stale.push({
            name: skill.name,
            ...(lastActivatedAt !== undefined ? { lastActivatedAt } : {}),
            lastUsedAt,
          });
      }
      return stale;
    },
  };
}
