//! The route table: the one list both the router and the OpenAPI
//! document are built from. Each entry names a handler and the path item
//! `#[utoipa::path]` generated for it, which carries the method, the
//! path, whether the route takes a body or query parameters, and its
//! responses — so a route cannot be served undocumented, or documented
//! and not served.

/// Calls macro `$then` with every `handler, doc_item;` pair.
macro_rules! api_routes {
    ($then:ident) => {
        $then! {
            vmm_ping, __path_vmm_ping;
            vmm_shutdown, __path_vmm_shutdown;
            vm_create, __path_vm_create;
            vm_boot, __path_vm_boot;
            vm_pause, __path_vm_pause;
            vm_resume, __path_vm_resume;
            vm_shutdown, __path_vm_shutdown;
            vm_delete, __path_vm_delete;
            vm_info, __path_vm_info;
            vm_counters, __path_vm_counters;
            vm_tiers_measure, __path_vm_tiers_measure;
            vm_tiering_get, __path_vm_tiering_get;
            vm_tiering_put, __path_vm_tiering_put;
            vm_tiering_stats, __path_vm_tiering_stats;
            vm_tiering_frames, __path_vm_tiering_frames;
            vm_rebalance_put, __path_vm_rebalance_put;
            vm_rebalance_get, __path_vm_rebalance_get;
            metrics, __path_metrics;
        }
    };
}

pub(crate) use api_routes;
