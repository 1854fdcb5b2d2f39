// Deterministic tools of the mini-editor workflow. Plain ESM JavaScript so the workflow loads with no build
// step. Files are reached only through `context.files`, which the engine confines to the tool's root.

const titleCase = (text) =>
  text
    .trim()
    .split(/\s+/)
    .map((word) => (word.length > 3 || /^[a-z]/.test(word) === false ? word[0].toUpperCase() + word.slice(1) : word))
    .join(' ')
    .replace(/^./, (first) => first.toUpperCase());

const slug = (text) =>
  text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 60) || 'document';

/** "Create a note about tide pools: what lives there, and how to visit safely" → topic and section names. */
function parseCreate(request) {
  const [head, tail] = request.split(/:(.*)/s);
  const topicMatch = /\b(?:about|on|for|called|titled)\s+(.+)$/i.exec(head.trim());
  const topic = (topicMatch ? topicMatch[1] : head.replace(/^\s*(create|write|draft|make|start)\s+(a|an|the)?\s*(new\s+)?(note|document|doc|page|file|markdown)?\s*/i, '')).replace(/[.!]+$/, '');
  const sections = (tail ?? '')
    .split(/,|\band\b|;/i)
    .map((part) => part.trim().replace(/[.!]+$/, ''))
    .filter((part) => part.length > 0);
  return { topic: topic.trim() || 'Untitled', sections };
}

/** The file the request names (`notes/x.md`), else an attachment, else a slug of the topic. */
function pickPath(input, topic) {
  if (typeof input.path === 'string' && input.path) return input.path;
  if (Array.isArray(input.files) && input.files.length > 0) return input.files[0];
  const named = /([\w./-]+\.md)\b/i.exec(input.request);
  if (named) return named[1];
  return `${slug(topic)}.md`;
}

const headings = (markdown) =>
  markdown
    .split('\n')
    .filter((line) => /^##\s+/.test(line))
    .map((line) => line.replace(/^##\s+/, '').trim());

const wordCount = (markdown) => (markdown.match(/[\p{L}\p{N}]+(?:['’-][\p{L}\p{N}]+)*/gu) ?? []).length;

export async function normalizeRequest(input, context) {
  const request = input.request.trim();
  const operationHint = /^\s*(edit|revise|update|change|add|append|rewrite|fix)\b/i.test(request) ? 'edit' : 'create';
  const parsed = parseCreate(request);
  const path = pickPath(input, parsed.topic);
  const exists = await context.files.exists(path);
  const existing = exists ? await context.files.read(path) : '';
  let title;
  let markdown;
  if (exists && operationHint === 'edit') {
    title = (/^#\s+(.+)$/m.exec(existing)?.[1] ?? parsed.topic).trim();
    const instruction = request.replace(/^[^:]*:\s*/, '');
    const addSection = /\badd\s+(?:a\s+)?(?:new\s+)?section\s+(?:on|about|for|called|titled)\s+(.+)$/i.exec(instruction);
    const addition = addSection
      ? `## ${titleCase(addSection[1].replace(/[.!]+$/, ''))}\n\n${`Notes on ${addSection[1].replace(/[.!]+$/, '')}.`}\n`
      : `## Revision\n\n${instruction}\n`;
    markdown = `${existing.trimEnd()}\n\n${addition}`;
  } else {
    title = titleCase(parsed.topic);
    const body = parsed.sections.length > 0 ? parsed.sections : ['Overview'];
    markdown = `# ${title}\n\n${request}\n\n${body.map((section) => `## ${titleCase(section)}\n\nNotes on ${section}.\n`).join('\n')}`;
  }
  return { request, operation_hint: operationHint, path, exists, existing_markdown: existing, title, markdown };
}

export async function writeDocument(input, context) {
  const path = context.stageOutputs.normalize_request?.path;
  if (typeof path !== 'string') throw new Error('normalize_request did not produce a path');
  const markdown = input.markdown.endsWith('\n') ? input.markdown : `${input.markdown}\n`;
  const written = await context.files.write(path, markdown);
  const title = input.title || (/^#\s+(.+)$/m.exec(markdown)?.[1] ?? path);
  await context.memory.add('project', { path, title }, { tags: ['document'] });
  return { path: written.path, bytes: written.bytes, title, length: wordCount(markdown), sections: headings(markdown), markdown };
}
