//! `toolhost:plugin/config`: the plugin's configuration values, exactly the keys its
//! manifest declares ([`PluginConfig`](super::super::PluginConfig)).

use super::ImportCtx;
use crate::v0_2::toolhost::plugin::config::Host;

impl Host for ImportCtx {
    fn get(&mut self, key: String) -> Option<String> {
        self.config.get(&key).map(str::to_owned)
    }

    fn keys(&mut self) -> Vec<String> {
        self.config.keys()
    }
}
