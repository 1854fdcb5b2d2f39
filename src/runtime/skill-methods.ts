import { z } from 'zod';
import { type MethodTable, OperatorScopes } from '../gateway/index.js';
import {
  type SkillExperience,
  type SkillLibrary,
  type SkillSummary,
  skillProposalStatuses,
} from '../skills/index.js';
import { ErrorCodes, UserInputError } from '../util/index.js';

const nameParams = z.object({ name: z.string().min(1).max(128) });

/** A skill as clients see it: no absolute paths of the server's disk beyond the skill's own folder. */
function describeSkill(skill: SkillSummary) {
  return {
    name: skill.name,
    description: skill.description,
    version: skill.version,
    dir: skill.dir,
    keywords: skill.keywords,
    autoActivate: skill.autoActivate,
    ...(skill.allowedTools ? { allowedTools: skill.allowedTools } : {}),
    ...(skill.createdBy ? { createdBy: skill.createdBy } : {}),
    ...(skill.createdFrom ? { createdFrom: skill.createdFrom } : {}),
  };
}

async function requireSkill(library: SkillLibrary, name: string): Promise<SkillSummary> {
  const skill = await library.get(name);
  if (!skill) throw new UserInputError({ code: ErrorCodes.notFound, message: `no skill named "${name}".` });
  return skill;
}

/**
 * `skills.list|show|provenance|stale` (read) and the proposals of skills from experience:
 * `skills.proposals` (read), `skills.scan`, `skills.approve`, `skills.reject` (write).
 */
export function registerSkillMethods(options: {
  methods: MethodTable;
  library: SkillLibrary;
  experience: SkillExperience;
  staleAfterDays: number;
}): void {
  const { methods, library, experience } = options;
  const { read, write } = OperatorScopes;

  methods.forwardBusEvent('skill:proposed', 'skill.proposed');
  methods.register('skills.list', {
    scopes: [read],
    params: z.object({ refresh: z.boolean().default(false) }),
    handler: async ({ refresh }) => {
      if (refresh) await library.refresh();
      return { skills: (await library.list()).map(describeSkill), problems: await library.problems() };
    },
  });
  methods.register('skills.show', {
    scopes: [read],
    params: nameParams,
    handler: async ({ name }) => {
      const skill = await requireSkill(library, name);
      return {
        skill: describeSkill(skill),
        provenance: await library.provenance(name),
        stale: (await library.staleSkills({ olderThanDays: options.staleAfterDays })).some(
          (entry) => entry.name === name,
        ),
      };
    },
  });
  methods.register('skills.provenance', {
    scopes: [read],
    params: nameParams,
    handler: async ({ name }) => {
      const records = await library.provenance(name);
      if (records.length === 0) await requireSkill(library, name);
      return { name, provenance: records };
    },
  });
  methods.register('skills.stale', {
    scopes: [read],
    params: z.object({ olderThanDays: z.number().int().min(1).max(36_500).optional() }),
    handler: async ({ olderThanDays }) => ({
      olderThanDays: olderThanDays ?? options.staleAfterDays,
      skills: await library.staleSkills({ olderThanDays: olderThanDays ?? options.staleAfterDays }),
    }),
  });
  methods.register('skills.proposals', {
    scopes: [read],
    params: z.object({
      status: z.enum(skillProposalStatuses).optional(),
      limit: z.number().int().min(1).max(1_000).default(100),
    }),
    handler: async (params) => ({ proposals: await experience.proposals(params) }),
  });
  methods.register('skills.scan', {
    scopes: [write],
    params: z.object({}),
    handler: async () => ({ proposals: await experience.scan() }),
  });
  methods.register('skills.approve', {
    scopes: [write],
    params: z.object({ id: z.string().min(1).max(128) }),
    handler: async ({ id }) => {
      const { proposal, skill } = await experience.approve(id);
      return { proposal, skill: describeSkill(skill) };
    },
  });
  methods.register('skills.reject', {
    scopes: [write],
    params: z.object({ id: z.string().min(1).max(128) }),
    handler: async ({ id }) => ({ proposal: await experience.reject(id) }),
  });
}
