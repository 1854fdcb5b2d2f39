import { type Command, Option } from 'commander';
import type {
  SkillExperience,
  SkillLibrary,
  SkillProposal,
  SkillProposalStatus,
} from '../../skills/index.js';
import { ErrorCodes, UserInputError } from '../../util/index.js';
import { fillHelpWhenAsked, loadSkills } from '../lazy-modules.js';
import { type CliIo, printJson, processIo, reportError } from '../output.js';

export interface SkillCommandDeps {
  /** Opens the skill library and the proposals on the configured workspace and database. */
  openSkills(): Promise<{
    library: SkillLibrary;
    experience: SkillExperience;
    staleAfterDays: number;
    close(): Promise<void>;
  }>;
  io?: CliIo;
  setExitCode(code: number): void;
}

interface JsonOption {
  json?: boolean;
}

function date(ms: number): string {
  return new Date(ms).toISOString().replace('T', ' ').slice(0, 16);
}

function proposalLine(proposal: SkillProposal): string {
  const items = new Set(proposal.sources.map((source) => source.workItemId)).size;
  return `${proposal.id}  ${proposal.status.padEnd(9)} ${proposal.skillName}  (${proposal.sources.length} finding(s) from ${items} work item(s)${proposal.workItemId ? `, work ${proposal.workItemId}` : ''})`;
}

function parseDays(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const days = Number(value);
  if (!Number.isInteger(days) || days < 1)
    throw new UserInputError({
      code: ErrorCodes.invalidRequest,
      message: '--days must be a positive integer.',
    });
  return days;
}

/**
 * `agentd skills list|show|provenance|stale` and the proposals of skills from experience:
 * `agentd skills proposals|scan|approve|reject`. `--json` everywhere.
 */
export function registerSkillCommands(program: Command, deps: SkillCommandDeps): void {
  const io = deps.io ?? processIo;
  const run = async (
    json: boolean | undefined,
    action: (skills: Awaited<ReturnType<SkillCommandDeps['openSkills']>>) => Promise<void>,
  ) => {
    let opened: Awaited<ReturnType<SkillCommandDeps['openSkills']>> | undefined;
    try {
      opened = await deps.openSkills();
      await action(opened);
    } catch (error) {
      deps.setExitCode(reportError(io, error, json === true));
    } finally {
      await opened?.close();
    }
  };
  const requireSkill = async (library: SkillLibrary, name: string) => {
    const skill = await library.get(name);
    if (!skill) throw new UserInputError({ code: ErrorCodes.notFound, message: `no skill named "${name}".` });
    return skill;
  };

  const statusOption = new Option('--status <status>', 'only one status');
  const skills = program
    .command('skills')
    .description('skills: list, show, provenance, stale; proposals from recurring findings');
  fillHelpWhenAsked(program, skills, async () => {
    statusOption.description = `only one status: ${(await loadSkills()).skillProposalStatuses.join(', ')}`;
  });

  skills
    .command('list')
    .description('every skill with its version and origin')
    .option('--json', 'print JSON')
    .action((options: JsonOption) =>
      run(options.json, async ({ library }) => {
        const list = await library.list();
        const problems = await library.problems();
        if (options.json) {
          printJson(io, { skills: list, problems });
          return;
        }
        if (list.length === 0) io.stdout('no skills\n');
        for (const skill of list) {
          const origin = skill.createdFrom ?? skill.createdBy ?? 'human';
          io.stdout(
            `${skill.name.padEnd(28)} v${String(skill.version).padEnd(4)} ${origin.padEnd(24)} ${skill.description}\n`,
          );
        }
        for (const problem of problems) io.stderr(`skipped ${problem.path}: ${problem.reason}\n`);
      }),
    );

  skills
    .command('show')
    .description('one skill: frontmatter, provenance and whether it is stale')
    .argument('<name>')
    .option('--json', 'print JSON')
    .action((name: string, options: JsonOption) =>
      run(options.json, async ({ library, staleAfterDays }) => {
        const skill = await requireSkill(library, name);
        const provenance = await library.provenance(name);
        const stale = (await library.staleSkills({ olderThanDays: staleAfterDays })).find(
          (entry) => entry.name === name,
        );
        if (options.json) {
          printJson(io, { skill, provenance, stale: stale !== undefined });
          return;
        }
        io.stdout(`${skill.name} v${skill.version}\n  ${skill.description}\n  file: ${skill.file}\n`);
        if (skill.keywords.length) io.stdout(`  triggers: ${skill.keywords.join(', ')}\n`);
        io.stdout(`  origin: ${skill.createdFrom ?? skill.createdBy ?? 'human'}\n`);
        const items = new Set(provenance.flatMap((record) => (record.workItemId ? [record.workItemId] : [])));
        io.stdout(`  provenance: ${provenance.length} record(s) from ${items.size} work item(s)\n`);
        if (stale)
          io.stdout(`  stale: not used since ${date(stale.lastUsedAt)} (over ${staleAfterDays} days)\n`);
      }),
    );

  skills
    .command('provenance')
    .description('where each version of a skill came from: work items and ledger entries')
    .argument('<name>')
    .option('--json', 'print JSON')
    .action((name: string, options: JsonOption) =>
      run(options.json, async ({ library }) => {
        const records = await library.provenance(name);
        if (records.length === 0) await requireSkill(library, name);
        if (options.json) {
          printJson(io, { name, provenance: records });
          return;
        }
        if (records.length === 0) io.stdout(`${name} has no recorded provenance (written by hand)\n`);
        for (const record of records) {
          const source =
            record.sourceType === 'ledger_entry'
              ? `ledger ${record.workItemId ?? '?'}#${record.ledgerSeq}${record.contentSnippet ? `: ${record.contentSnippet.replace(/\s+/g, ' ').slice(0, 120)}` : ''}`
              : `work item ${record.workItemId ?? '(none)'}`;
          io.stdout(`v${record.skillVersion}  ${date(record.createdAt)}  ${source}\n`);
        }
      }),
    );

  skills
    .command('stale')
    .description('skills not used (activated or rewritten) for a while; nothing is deleted')
    .option('--days <n>', 'unused for this many days (default: skills.staleAfterDays, 30)')
    .option('--json', 'print JSON')
    .action((options: JsonOption & { days?: string }) =>
      run(options.json, async ({ library, staleAfterDays }) => {
        const days = parseDays(options.days) ?? staleAfterDays;
        const stale = await library.staleSkills({ olderThanDays: days });
        if (options.json) {
          printJson(io, { olderThanDays: days, skills: stale });
          return;
        }
        if (stale.length === 0) io.stdout(`no skill unused for ${days} days\n`);
        for (const skill of stale)
          io.stdout(
            `${skill.name.padEnd(28)} last used ${date(skill.lastUsedAt)}${skill.lastActivatedAt === undefined ? ' (never activated)' : ''}\n`,
          );
      }),
    );

  skills
    .command('proposals')
    .description('skills proposed from findings that recur across work items')
    .addOption(statusOption)
    .option('--json', 'print JSON')
    .action((options: JsonOption & { status?: string }) =>
      run(options.json, async ({ experience }) => {
        const { skillProposalStatuses } = await loadSkills();
        if (options.status && !(skillProposalStatuses as ReadonlyArray<string>).includes(options.status)) {
          throw new UserInputError({
            code: ErrorCodes.invalidRequest,
            message: `unknown status ${options.status}; statuses are ${skillProposalStatuses.join(', ')}.`,
          });
        }
        const proposals = await experience.proposals(
          options.status ? { status: options.status as SkillProposalStatus } : {},
        );
        if (options.json) {
          printJson(io, { proposals });
          return;
        }
        if (proposals.length === 0) io.stdout('no skill proposals\n');
        for (const proposal of proposals) io.stdout(`${proposalLine(proposal)}\n`);
      }),
    );

  skills
    .command('scan')
    .description('look for recurring findings now and propose skills for new patterns')
    .option('--json', 'print JSON')
    .action((options: JsonOption) =>
      run(options.json, async ({ experience }) => {
        const proposals = await experience.scan();
        if (options.json) printJson(io, { proposals });
        else if (proposals.length === 0) io.stdout('no new recurring pattern\n');
        else for (const proposal of proposals) io.stdout(`${proposalLine(proposal)}\n`);
      }),
    );

  skills
    .command('approve')
    .description('publish a draft proposal as a skill (its provenance lists every source finding)')
    .argument('<id>')
    .option('--json', 'print JSON')
    .action((id: string, options: JsonOption) =>
      run(options.json, async ({ experience }) => {
        const { proposal, skill } = await experience.approve(id);
        if (options.json) printJson(io, { proposal, skill });
        else io.stdout(`${skill.name} v${skill.version} written to ${skill.file}\n`);
      }),
    );

  skills
    .command('reject')
    .description('drop a proposal; its pattern is not proposed again')
    .argument('<id>')
    .option('--json', 'print JSON')
    .action((id: string, options: JsonOption) =>
      run(options.json, async ({ experience }) => {
        const proposal = await experience.reject(id);
        if (options.json) printJson(io, { proposal });
        else io.stdout(`${proposal.id} rejected\n`);
      }),
    );
}
