export {
  type CreateSkillExperienceOptions,
  createSkillExperience,
  type ProposeWork,
  type SkillExperience,
  type SkillExperienceConfig,
  type SkillProposal,
  type SkillProposalSource,
  type SkillProposalStatus,
  type SkillsConfig,
  skillExperienceConfigSchema,
  skillProposalStatuses,
  skillsConfigSchema,
} from './experience.js';
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
  type SkillCreationProvenance,
  type SkillLibrary,
  type SkillProblem,
  type SkillProvenanceRecord,
  type SkillSummary,
  type SkillUpdate,
  type StaleSkill,
} from './library.js';
export {
  createSkillActivationRetention,
  type SkillActivationRetention,
  type SkillActivationRetentionOptions,
} from './retention.js';
export { createSkillTools } from './tools.js';
