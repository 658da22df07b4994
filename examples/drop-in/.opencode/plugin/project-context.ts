export { default } from "opencode-project-context";
