"""The plugin manager, the hook specs and the index of installed plugins (plugin authors import
orchestrator.plugin_api)."""
