import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createSkillLibrary, createSkillTools } from '../../src/skills/index.js';
import { createHarness, tempDir } from './helpers.js';

async function writeSkill(root: string, name: string, frontmatter: string, body: string) {
  await mkdir(path.join(root, name), { recursive: true });
  await writeFile(path.join(root, name, 'SKILL.md'), `---\nname: ${name}\n${frontmatter}---\n${body}\n`);
}

describe('engage loop with skills', () => {
  it('puts the catalog in the system prompt, auto-activates by trigger, and keeps activate_skill bodies in the system prompt', async () => {
    const skillsDir = await tempDir();
    await writeSkill(
      skillsDir,
      'invoices',
      'description: Handle invoices.\ntriggers: [invoice]\n',
      'INVOICE RULES: always check VAT.',
    );
    await writeSkill(skillsDir, 'tone', 'description: Write in a friendly tone.\n', 'TONE RULES: be kind.');
    const harness = await createHarness({
      userMessage: 'Check this invoice please',
      model: {
        steps: [
          { toolCalls: [{ name: 'activate_skill', arguments: { name: 'tone' } }] },
          { text: 'Checked, kindly.' },
        ],
      },
    });
    const library = createSkillLibrary({ dirs: [skillsDir], db: harness.db });
    for (const tool of createSkillTools({ library })) harness.registry.register(tool);
    const result = await harness.run({ skills: { library } });
    expect(result).toMatchObject({ status: 'completed', activeSkills: ['invoices', 'tone'] });
    const [first, second] = harness.model.requests;
    const firstSystem = first!.messages[0]!.content;
    expect(firstSystem).toContain('<skill name="tone">Write in a friendly tone.</skill>');
    expect(firstSystem).toContain(
      '<active_skill name="invoices">\nINVOICE RULES: always check VAT.\n</active_skill>',
    );
    expect(firstSystem).not.toContain('TONE RULES');
    expect(second!.messages[0]!.content).toContain(
      '<active_skill name="tone">\nTONE RULES: be kind.\n</active_skill>',
    );
    expect(result.newMessages[1]).toMatchObject({
      content: 'Skill tone v1 is active; its instructions are now in your system prompt.',
    });
    expect(
      await harness.db.all('SELECT skill_name, activation_type, run_id FROM skill_activations ORDER BY id'),
    ).toEqual([
      { skill_name: 'invoices', activation_type: 'auto', run_id: 'run_1' },
      { skill_name: 'tone', activation_type: 'manual', run_id: 'run_1' },
    ]);
  });
});
