import { z } from 'zod';
import type { Ledger } from '../ledger/index.js';
import { defineTool, type ToolDefinition } from '../tools/index.js';
import type { SkillExperience } from './experience.js';
import { skillNamePattern } from './frontmatter.js';
import type { SkillLibrary } from './library.js';

/**
 * `discover_skills {query}`, `activate_skill {name}` and `create_skill {name, description, content,
 * triggers?, ledger_seqs?}`. activate_skill hands the body to the engage loop through result metadata; the
 * loop puts it in the system prompt, so it is not repeated in the transcript and survives compaction.
 */
export function createSkillTools(options: {
  library: SkillLibrary;
  ledger?: Ledger;
  /** When the run's work item was proposed from a recurring pattern, the skill records its sources. */
  experience?: Pick<SkillExperience, 'forWorkItem' | 'markCreated'>;
}): ToolDefinition[] {
  const { library, ledger } = options;

  const discover = defineTool({
    name: 'discover_skills',
    description:
      'Find skills (reusable instructions) by keywords. Returns names and descriptions; activate one to use it.',
    examples: [{ query: 'release notes' }],
    input: z.object({
      query: z.string().default('').describe('Words describing the task; empty lists all skills'),
    }),
    async execute(args) {
      const found = await library.search(args.query, { limit: 20 });
      if (found.length === 0) return 'No skills match.';
      return found.map((skill) => `- ${skill.name} (v${skill.version}): ${skill.description}`).join('\n');
    },
  });

  const activate = defineTool({
    name: 'activate_skill',
    description: "Load a skill's full instructions into your system prompt for the rest of this run.",
    examples: [{ name: 'release-notes' }],
    input: z.object({ name: z.string().min(1) }),
    async execute(args, context) {
      const skill = await library.activate(args.name, {
        runId: context.runId,
        agentId: context.agentId,
        ...(context.workItemId ? { workItemId: context.workItemId } : {}),
      });
      return {
        content: `Skill ${skill.name} v${skill.version} is active; its instructions are now in your system prompt.`,
        metadata: { activatedSkill: { name: skill.name, version: skill.version, body: skill.body } },
      };
    },
  });

  const create = defineTool({
    name: 'create_skill',
    description:
      'Save what you learned as a reusable skill (or a new version of one you created). content is Markdown ' +
      'instructions; triggers are keywords that auto-activate it; ledger_seqs are the ledger entries it is based on ' +
      "(defaults to this work item's findings and decisions).",
    examples: [
      {
        name: 'release-notes',
        description: 'Write release notes from merged changes',
        content: '1. List the merged changes.\n2. Group them by area.',
      },
    ],
    input: z.object({
      name: z.string().regex(skillNamePattern).max(64).describe('lowercase-with-hyphens'),
      description: z.string().min(1).max(1024).describe('What it does and when to use it'),
      content: z.string().min(1),
      triggers: z.array(z.string().min(1)).optional(),
      ledger_seqs: z.array(z.number().int().min(1)).optional(),
    }),
    async execute(args, context) {
      let seqs = args.ledger_seqs;
      if (seqs === undefined && ledger && context.workItemId) {
        const entries = await ledger.read(context.workItemId);
        seqs = entries
          .filter((entry) => entry.entryType === 'finding' || entry.entryType === 'decision')
          .map((entry) => entry.seq);
      }
      const proposal = context.workItemId
        ? await options.experience?.forWorkItem(context.workItemId)
        : undefined;
      const skill = await library.create(
        {
          name: args.name,
          description: args.description,
          content: args.content,
          ...(args.triggers ? { triggers: args.triggers } : {}),
        },
        {
          ...(context.workItemId ? { workItemId: context.workItemId } : {}),
          ...(seqs ? { ledgerEntrySeqs: seqs } : {}),
          ...(proposal
            ? {
                sources: proposal.sources.map(({ workItemId, seq }) => ({ workItemId, seq })),
                createdFrom: `pattern:${proposal.patternKey}`,
              }
            : {}),
        },
      );
      if (proposal) await options.experience?.markCreated(proposal.id, skill.version);
      return `Saved skill ${skill.name} v${skill.version}.`;
    },
  });

  return [discover, activate, create];
}
