/**
 * Regenerates the dashboard screenshots in docs/images/ (not run in CI): starts agentd in-process on the
 * offline local model, gives every view something to show, and photographs each one.
 *
 *   npm run build && npx tsx scripts/screenshots.ts
 */
import { cpSync } from 'node:fs';
import { join } from 'node:path';
import { launchChromium } from '../test/helpers/chromium.js';
import { startRuntime } from '../test/runtime/helpers.js';

const root = join(import.meta.dirname, '..');
const out = join(root, 'docs', 'images');

const started = await startRuntime();
const { runtime } = started;
const agents = runtime.work.agents!;
const client = await started.connect();
const browser = await launchChromium();
try {
  await agents.spawn({
    id: 'main',
    name: 'Main',
    role: 'the default agent',
    position: { x: 480, y: 290 },
    decisionLoop: { intervalMs: 1_500 },
  });
  await agents.spawn({ id: 'scout', name: 'Scout', role: 'explores', position: { x: 210, y: 160 } });
  await agents.spawn({ id: 'critic', name: 'Critic', role: 'reviews', position: { x: 760, y: 420 } });
  await agents.spawn({ id: 'scribe', name: 'Scribe', role: 'writes', position: { x: 300, y: 470 } });

  // Chat history, with a plan's work items and their ledgers behind it.
  await runtime.sendMessage({ text: 'Hello! What can you do?' });
  await runtime.sendMessage({ text: 'Remember that the launch window opens on Tuesday.' });
  await client.call('agent.control', {
    action: 'goal',
    goal: 'Collect the open questions. Then draft an answer for each. And list the risks.',
    sessionKey: 'agent:main:main',
    agentId: 'main',
  });

  // The gateway runs workflows only from its configured directories (by default <home>/workflow-library).
  const dir = join(runtime.state.home, 'workflow-library', 'mini-editor');
  cpSync(join(root, 'examples', 'mini-editor'), dir, { recursive: true });

  const page = await browser.newPage({ viewport: { width: 1440, height: 900 }, deviceScaleFactor: 1 });
  const base = started.url.replace(/^ws/, 'http');
  await page.goto(`${base}/#token=${encodeURIComponent(runtime.state.token)}`);
  await page.getByRole('heading', { name: /Agents \(4\)/ }).waitFor();
  await client.call('agents.message', { agentId: 'scout', content: 'What do you see to the north?' });
  await client.call('agent.broadcast', { content: 'Stand-up in five minutes.', from: 'user' });
  await page.locator('.bubble').first().waitFor();
  await page.getByRole('button', { name: 'Scout', exact: true }).click();
  await page.waitForTimeout(1_200);
  await page.screenshot({ path: join(out, 'dashboard-world.png') });

  await page.goto(`${base}/#chat`);
  await page.locator('.message.assistant').first().waitFor();
  await page.getByLabel('Message', { exact: true }).fill('What do you remember about the launch?');
  await page.getByRole('button', { name: 'Send' }).click();
  await page.locator('.message.assistant').nth(2).waitFor();
  await page.waitForTimeout(800);
  await page.screenshot({ path: join(out, 'dashboard-chat.png') });

  await page.goto(`${base}/#work`);
  await page.locator('tr[data-work-id]').first().waitFor();
  await page.getByRole('textbox', { name: 'Goal' }).fill('Survey the map. Then report what changed.');
  await page.getByRole('button', { name: 'Plan goal' }).click();
  await page.locator('.plan').first().waitFor();
  await page.locator('tr[data-work-id] button.link').first().click();
  await page.locator('[aria-label="Ledger"] li').first().waitFor();
  await page.waitForTimeout(2_500);
  await page.screenshot({ path: join(out, 'dashboard-work.png') });

  await page.goto(`${base}/#workflows`);
  await page.getByLabel('Workflow', { exact: true }).selectOption(dir);
  await page.locator('.node').first().waitFor();
  await page.getByRole('button', { name: 'Start run' }).click();
  await page.locator('#run-status .run-completed').waitFor({ timeout: 60_000 });
  await page.locator('[aria-label="Stage records"] li').first().waitFor();
  await page.waitForTimeout(500);
  await page.screenshot({ path: join(out, 'dashboard-workflows.png'), fullPage: true });

  await page.goto(`${base}/#memory`);
  await page.locator('.memory-table tbody tr').nth(2).waitFor();
  await page.screenshot({ path: join(out, 'dashboard-memory.png') });

  await runtime.healthSamples.sampleNow();
  await page.goto(`${base}/#health`);
  await page
    .locator('#health-store')
    .filter({ hasText: /sqlite|postgres|memory/ })
    .waitFor();
  await page.screenshot({ path: join(out, 'dashboard-health.png') });

  const phone = await browser.newPage({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2 });
  await phone.goto(`${base}/#token=${encodeURIComponent(runtime.state.token)}`);
  await phone.getByRole('heading', { name: /Agents \(4\)/ }).waitFor();
  await phone.waitForTimeout(800);
  await phone.screenshot({ path: join(out, 'dashboard-phone.png') });

  const signIn = await browser.newPage({ viewport: { width: 1000, height: 640 } });
  await signIn.goto(`${base}/`);
  await signIn.getByLabel('Access token').waitFor();
  await signIn.screenshot({ path: join(out, 'dashboard-sign-in.png') });
  process.stdout.write(`screenshots written to ${out}\n`);
} finally {
  await browser.close();
  await client.close();
  await runtime.close();
}
