import { setFlagsFromString } from 'node:v8';

/**
 * Turns off V8's allocation-site pretenuring for this process. A chat turn's objects die with the turn, but
 * V8 judges a site by whether its objects survived the last young-generation collection: objects a dead
 * old one still points to count as survivors, so sites of a turn's arrays and literals were judged
 * long-lived and from then on allocated in the old generation, where each kept what it pointed to alive
 * through every young collection until a full one. A served chat turn promoted 11.4 KB with pretenuring and
 * 3.2 KB without (docs/decisions/0026-no-per-call-getter-literals.md). Process-wide, so the CLI calls it
 * and a program embedding agentd decides for itself (or starts Node with `--no-allocation-site-pretenuring`).
 */
export function disableAllocationSitePretenuring(): void {
  setFlagsFromString('--no-allocation-site-pretenuring');
}
