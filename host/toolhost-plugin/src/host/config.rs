//! `toolhost:plugin/config`: the plugin's configuration values, exactly the keys its
//! manifest declares ([`PluginConfig`](super::super::PluginConfig)).

use super::super::bindings::toolhost::plugin::config::Host;
use super::ImportCtx;

impl Host for ImportCtx {
    fn get(&mut self, key: String) -> Option<String> {
        self.config.get(&key).map(str::to_owned)
    }

    fn keys(&mut self) -> Vec<String> {
        self.config.keys()
    }
}
