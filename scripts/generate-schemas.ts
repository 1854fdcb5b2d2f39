// Writes JSON Schema files for the workflow manifests into schemas/, for editors (YAML language servers
// pick them up through a `# yaml-language-server: $schema=…` comment). Run: `npx tsx scripts/generate-schemas.ts`.
// The zod schemas in src/workflow/manifest-schemas.ts are the source of truth; these files are generated.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { manifestFiles } from '../src/workflow/manifest-schemas.js';

const outDir = join(dirname(fileURLToPath(import.meta.url)), '..', 'schemas');
mkdirSync(outDir, { recursive: true });

for (const spec of Object.values(manifestFiles)) {
  const name = spec.file.replace(/\.yaml$/, '');
  // `io: 'input'` describes what may be written in the file (defaults make fields optional).
  const schema = z.toJSONSchema(spec.schema as z.ZodType, { io: 'input', unrepresentable: 'any' }) as Record<
    string,
    unknown
  >;
  const document = {
    ...schema,
    $id: `https://agentd.dev/schemas/workflow/${name}.schema.json`,
    title: `agentd workflow ${spec.file}`,
    description: `Generated from src/workflow/manifest-schemas.ts by scripts/generate-schemas.ts; do not edit.`,
  };
  writeFileSync(join(outDir, `${name}.schema.json`), `${JSON.stringify(document, null, 2)}\n`);
  process.stdout.write(`schemas/${name}.schema.json\n`);
}
