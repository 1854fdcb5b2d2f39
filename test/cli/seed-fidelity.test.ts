import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { tempHome } from '../runtime/helpers.js';

async function run(args: string[]) {
  let out = '';
  let err = '';
  const code = await main(['node', 'agentd', ...args], {
    stdout: (text) => {
      out += text;
    },
    stderr: (text) => {
      err += text;
    },
  });
  return { code, out, err };
}

describe('agentd CLI: offline honesty, blocked work, skills', () => {
  it('goal with the offline model says nothing was really done, and how to get a real model', async () => {
    const home = tempHome('agentd-cli-goal-');
    const goal = await run([
      '--home',
      home,
      'goal',
      'Collect the open questions. Then draft an answer for each.',
    ]);
    expect(goal.code).toBe(0);
    expect(goal.out).not.toContain('All tasks completed');
    expect(goal.out).not.toMatch(/^✓ /m);
    expect(goal.out).toContain('2 of 2 task(s) were only acknowledged by the offline model');
    expect(goal.out).toContain('ANTHROPIC_API_KEY');
    expect(goal.out).toContain('AGENTD_MODEL');

    // The skills the default workspace ships, seen through the CLI.
    const list = await run(['--home', home, 'skills', 'list']);
    expect(list.code).toBe(0);
    expect(list.out).toContain('code-review');
    const show = await run(['--home', home, 'skills', 'show', 'code-review', '--json']);
    expect(JSON.parse(show.out)).toMatchObject({ skill: { name: 'code-review' }, stale: false });
    expect((await run(['--home', home, 'skills', 'provenance', 'code-review'])).out).toContain(
      'no recorded provenance',
    );
    expect((await run(['--home', home, 'skills', 'stale'])).out).toContain('no skill unused for 30 days');
    expect((await run(['--home', home, 'skills', 'scan'])).out).toContain('no new recurring pattern');
    expect((await run(['--home', home, 'skills', 'reject', 'skp_nope'])).code).toBe(2);
    expect((await run(['--home', home, 'skills', 'proposals', '--status', 'maybe'])).code).toBe(2);
  }, 60_000);

  it('skills list on a home nothing ran on yet shows the skills the default workspace ships', async () => {
    const home = tempHome('agentd-cli-fresh-skills-');
    const list = await run(['--home', home, 'skills', 'list']);
    expect(list.code).toBe(0);
    expect(list.out).toContain('code-review');
    expect(list.out).not.toContain('no skills');
    const show = await run(['--home', home, 'skills', 'show', 'code-review', '--json']);
    expect(JSON.parse(show.out)).toMatchObject({ skill: { name: 'code-review' } });
  });

  it('work block and unblock, with the reason in the list and both notes in the ledger', async () => {
    const home = tempHome('agentd-cli-block-');
    const id = (await run(['--home', home, 'work', 'submit', 'task', 'ship', 'it'])).out.trim();
    const blocked = await run([
      '--home',
      home,
      'work',
      'block',
      id,
      '--reason',
      'No release notes.',
      '--needs',
      'notes',
    ]);
    expect(blocked.out).toBe(`${id} blocked: No release notes. (needs: notes)\n`);
    const list = await run(['--home', home, 'work', 'list']);
    expect(list.out).toContain('blocked: No release notes. (needs: notes)');
    expect((await run(['--home', home, 'work', 'unblock', id, '--note', 'Notes are in NOTES.md.'])).out).toBe(
      `${id} queued again\n`,
    );
    const show = await run(['--home', home, 'work', 'show', id]);
    expect(show.out).toContain('note: Blocked: No release notes. (needs: notes)');
    expect(show.out).toContain('note: Unblocked: Notes are in NOTES.md.');
    expect((await run(['--home', home, 'work', 'unblock', id])).code).toBe(2);
    expect((await run(['--home', home, 'work', 'block', id])).code).not.toBe(0);
  }, 60_000);
});
