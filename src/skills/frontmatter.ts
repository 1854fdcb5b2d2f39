import { z } from 'zod';
import { formatZodIssues, yamlParser } from '../util/index.js';

/** Agent Skills spec: 1–64 chars, lowercase letters, digits and single inner hyphens. */
export const skillNamePattern = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;
export const maxSkillNameLength = 64;

export function skillNameProblem(name: string): string | undefined {
  if (name.length === 0 || name.length > maxSkillNameLength)
    return `name must be 1–${maxSkillNameLength} characters`;
  if (!skillNamePattern.test(name))
    return 'name may only hold lowercase letters, digits and single hyphens, not at either end';
  return undefined;
}

const keywordList = z.array(z.string().min(1)).default([]);

/**
 * The SKILL.md frontmatter: the Agent Skills fields plus agentd's own (`triggers`, `auto_activate`, `version`,
 * provenance). Unknown keys (OpenClaw's `user-invocable`, `homepage`, …) are kept, not rejected, so skills
 * written for other runtimes load.
 */
export const skillFrontmatterSchema = z
  .object({
    name: z.string(),
    description: z.string().trim().min(1).max(1024),
    license: z.string().optional(),
    compatibility: z.string().max(500).optional(),
    /** Space-delimited in the spec; a YAML list is accepted too. */
    'allowed-tools': z
      .union([z.string(), z.array(z.string())])
      .optional()
      .transform((value) =>
        value === undefined ? undefined : Array.isArray(value) ? value : value.split(/\s+/).filter(Boolean),
      ),
    metadata: z.record(z.string(), z.unknown()).optional(),
    /** `triggers: [kw, …]` is shorthand for `triggers: { keywords: [kw, …] }`. */
    triggers: z
      .union([
        z.array(z.string().min(1)),
        z
          .object({
            keywords: keywordList,
            faculties: keywordList,
            params: z.record(z.string(), z.string()).optional(),
          })
          .loose(),
      ])
      .optional()
      .transform((value) => (Array.isArray(value) ? { keywords: value, faculties: [] as string[] } : value)),
    auto_activate: z.boolean().optional(),
    version: z.coerce.number().int().min(1).default(1),
    created_by: z.string().optional(),
    created_from: z.string().optional(),
    updated_at: z.union([z.string(), z.number(), z.date()]).optional(),
  })
  .loose();

export type SkillFrontmatter = z.output<typeof skillFrontmatterSchema>;

export type ParsedSkillFile =
  | { ok: true; frontmatter: SkillFrontmatter; body: string }
  | { ok: false; reason: string };

/**
 * Reads a YAML front matter block into plain values; throws on malformed YAML. The skill library's reader
 * answers from the values of blocks it has read before (see `createSkillLibrary`).
 */
export type FrontmatterReader = (block: string) => unknown;

const readYaml: FrontmatterReader = (block) => yamlParser().parse(block);

/** Splits `---\n<yaml>\n---\n<body>` and validates the YAML. Never throws. */
export function parseSkillFile(text: string, read: FrontmatterReader = readYaml): ParsedSkillFile {
  const normalized = text.replace(/^\uFEFF/, '').replace(/\r\n/g, '\n');
  if (!normalized.startsWith('---\n'))
    return { ok: false, reason: 'SKILL.md must start with a "---" YAML frontmatter block' };
  const end = normalized.indexOf('\n---', 3);
  if (end < 0) return { ok: false, reason: 'the frontmatter block is not closed by a "---" line' };
  const afterMarker = normalized.indexOf('\n', end + 4);
  const body = afterMarker < 0 ? '' : normalized.slice(afterMarker + 1);
  let raw: unknown;
  try {
    raw = read(normalized.slice(4, end));
  } catch (error) {
    return {
      ok: false,
      reason: `the frontmatter is not valid YAML: ${(error as Error).message.split('\n')[0]}`,
    };
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    return { ok: false, reason: 'the frontmatter must be a YAML mapping' };
  const parsed = skillFrontmatterSchema.safeParse(raw);
  if (!parsed.success)
    return { ok: false, reason: `invalid frontmatter: ${formatZodIssues(parsed.error.issues)}` };
  const nameProblem = skillNameProblem(parsed.data.name);
  if (nameProblem) return { ok: false, reason: `invalid name "${parsed.data.name}": ${nameProblem}` };
  return { ok: true, frontmatter: parsed.data, body: body.trim() };
}
