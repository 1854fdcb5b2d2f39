export {
  type ParsedSkillFile,
  parseSkillFile,
  type SkillFrontmatter,
  skillFrontmatterSchema,
  skillNamePattern,
  skillNameProblem,
} from './frontmatter.js';
export {
  type ActivatedSkill,
  type ActivationContext,
  type CreateSkillLibraryOptions,
  createSkillLibrary,
  type SkillLibrary,
  type SkillProblem,
  type SkillProvenanceRecord,
  type SkillSummary,
  type StaleSkill,
} from './library.js';
export { createSkillTools } from './tools.js';
